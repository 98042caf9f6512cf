#!/usr/bin/perl
# termorch's sandbox shim (src/task/sandbox.ts builds its command line): the two ends of a
# sandboxed agent's launch, one outside bubblewrap and one inside it.
#
#   perl sandbox.pl outside [RELAY_DIR] -- bwrap ARGS... -- perl sandbox.pl inside [RELAY_DIR] -- AGENT...
#
# Signals. The pane supervisor sends TERM (then KILL after the grace) to every process of the
# attempt. bwrap dies of a TERM at once, and its namespace's processes with it: the agent would
# lose its grace. So outside, TERM, INT, HUP and QUIT are ignored (bwrap inherits that), and inside
# they are the default again for the agent: it alone decides what a TERM does, and KILL ends all.
#
# Network allowlist (RELAY_DIR given). The sandbox has a network of its own with nothing but
# loopback. RELAY_DIR/routes lists the allowed hosts, one a line: "INDEX ADDR PORT HOST PORT"
# (tabs). Inside, a listener on ADDR:PORT (the host's name resolves to ADDR in the sandbox's
# /etc/hosts) passes each connection through the unix socket RELAY_DIR/INDEX.sock; outside, a
# listener there connects it to HOST:PORT. Nothing else is listened on, so every other host, port
# or raw connection is refused. TLS goes end to end: the relay sees bytes, never names or keys.
#
# perl-base only (IO::Socket::IP, IO::Socket::UNIX).
use strict;

my @SIGNALS = qw(TERM INT HUP QUIT);

my ($side, @rest) = @ARGV;
die "usage: sandbox.pl outside|inside [RELAY_DIR] -- COMMAND...\n" unless ($side // '') =~ /\A(outside|inside)\z/;
my $relay = $rest[0] ne '--' ? shift @rest : undef;
shift @rest if ($rest[0] // '') eq '--';
die "sandbox.pl: no command\n" unless @rest;

if ($side eq 'outside') {
  $SIG{$_} = 'IGNORE' for @SIGNALS;
  exec { $rest[0] } @rest or die "sandbox.pl: cannot run $rest[0]: $!\n" unless defined $relay;
} else {
  $SIG{$_} = 'DEFAULT' for @SIGNALS;
  exec { $rest[0] } @rest or die "sandbox.pl: cannot run $rest[0]: $!\n" unless defined $relay;
  # The relay in the sandbox outlives the agent's TERM like the one outside; the agent gets the default.
  $SIG{$_} = 'IGNORE' for @SIGNALS;
}
exit relay($side, $relay, @rest);

# Listens on each route's end on this side, runs the command, passes connections until it exits;
# returns its exit status (a signal as 128 + its number, as a shell says it).
sub relay {
  my ($side, $dir, @command) = @_;
  require IO::Socket::IP;
  require IO::Socket::UNIX;
  open(my $fh, '<', "$dir/routes") or die "sandbox.pl: cannot read $dir/routes: $!\n";
  my %listeners;
  while (my $line = <$fh>) {
    chomp $line;
    my ($i, $addr, $port, $host, $to_port) = split /\t/, $line;
    next unless defined $to_port;
    my $l = $side eq 'outside'
      ? IO::Socket::UNIX->new(Type => IO::Socket::SOCK_STREAM(), Local => "$dir/$i.sock", Listen => 64)
      : IO::Socket::IP->new(LocalHost => $addr, LocalPort => $port, Listen => 64, ReuseAddr => 1);
    die "sandbox.pl: cannot listen for $host:$to_port: $!\n" unless $l;
    $listeners{ fileno $l } = { sock => $l, to => $side eq 'outside' ? [$host, $to_port] : "$dir/$i.sock" };
  }
  close $fh;
  my $pid = fork() // die "sandbox.pl: fork: $!\n";
  if ($pid == 0) {
    close $_->{sock} for values %listeners;
    $SIG{$_} = 'DEFAULT' for $side eq 'inside' ? @SIGNALS : ();
    exec { $command[0] } @command or print STDERR "sandbox.pl: cannot run $command[0]: $!\n";
    require POSIX;
    POSIX::_exit($! == 2 ? 127 : 126);
  }
  # The agent's output pipes are the agent's: a relay that held them would keep its log open.
  open(STDOUT, '>', '/dev/null');
  open(STDERR, '>', '/dev/null') if $side eq 'inside';
  my (%handlers, $status);
  while (1) {
    my $rin = '';
    vec($rin, $_, 1) = 1 for keys %listeners;
    my $n = select(my $rout = $rin, undef, undef, 0.5);
    while ((my $r = waitpid(-1, 1)) > 0) {
      if ($r == $pid) { $status = $? }
      else { delete $handlers{$r} }
    }
    last if defined $status;
    next unless $n > 0;
    for my $fd (grep { vec($rout, $_, 1) } keys %listeners) {
      my $client = $listeners{$fd}{sock}->accept() or next;
      my $h = fork();
      if (!defined $h) { close $client; next }
      if ($h == 0) {
        close $_->{sock} for values %listeners;
        $SIG{$_} = 'DEFAULT' for @SIGNALS;
        pass_through($client, $listeners{$fd}{to});
        require POSIX;
        POSIX::_exit(0);
      }
      $handlers{$h} = 1;
      close $client;
    }
  }
  kill 'KILL', keys %handlers;
  1 while waitpid(-1, 0) > 0;
  unlink map { "$dir/$_.sock" } 0 .. 1000 if $side eq 'outside';
  return $status & 127 ? 128 + ($status & 127) : $status >> 8;
}

# One connection: to its destination, then bytes both ways until both sides are done.
sub pass_through {
  my ($client, $to) = @_;
  my $server = ref $to
    ? IO::Socket::IP->new(PeerHost => $to->[0], PeerPort => $to->[1], Timeout => 30)
    : IO::Socket::UNIX->new(Type => IO::Socket::SOCK_STREAM(), Peer => $to);
  return unless $server;
  my %other = (fileno($client) => $server, fileno($server) => $client);
  my %open = (fileno($client) => $client, fileno($server) => $server);
  while (%open) {
    my $rin = '';
    vec($rin, $_, 1) = 1 for keys %open;
    my $n = select(my $rout = $rin, undef, undef, undef);
    next if $n < 0;
    for my $fd (grep { vec($rout, $_, 1) } keys %open) {
      my $got = sysread($open{$fd}, my $data, 65536);
      if (!$got) {
        delete $open{$fd};
        shutdown($other{$fd}, 1);
        return unless defined $got;
        next;
      }
      for (my $off = 0; $off < length $data;) {
        my $w = syswrite($other{$fd}, $data, length($data) - $off, $off);
        return unless defined $w;
        $off += $w;
      }
    }
  }
}
