#!/usr/bin/perl
# termorch's sandbox shim (src/task/sandbox.ts builds its command line): the two ends of a
# sandboxed agent's launch, one outside bubblewrap and one inside it.
#
#   perl sandbox.pl outside [--seccomp FILE] [RELAY_DIR] -- bwrap ARGS... -- perl sandbox.pl inside [RELAY_DIR] -- AGENT...
#
# Seccomp (FILE given). FILE holds the compiled filter (src/sandbox/seccomp.ts); outside opens it
# for bwrap, which reads it from the descriptor named by `--seccomp FD` and closes it.
#
# Signals. The pane supervisor sends TERM (then KILL after the grace) to every process of the
# attempt. bwrap dies of a TERM at once, and its namespace's processes with it: the agent would
# lose its grace. So outside, TERM, INT, HUP and QUIT are ignored (bwrap inherits that), and inside
# they are the default again for the agent: it alone decides what a TERM does, and KILL ends all.
#
# Network allowlist (RELAY_DIR given). The sandbox has a network of its own with nothing but
# loopback. RELAY_DIR/routes lists what is allowed, tab-separated (src/sandbox/policy.ts):
#   route INDEX HOST PORT LISTEN   one allowed host and port; LISTEN is a loopback address, or -
#   proxy ADDR PORT                the sandbox's HTTP proxy, for the routes with LISTEN -
# Outside, each route's unix socket RELAY_DIR/INDEX.sock is listened on and its connections are
# connected to HOST:PORT. Inside, a route with a LISTEN address is listened on at LISTEN:PORT (a
# local server, reached as outside); the others only through the proxy, which takes CONNECT
# HOST:PORT (and a plain `GET http://HOST:PORT/...`) for an allowed route and refuses every other
# with 403. Nothing else listens, so every other host, port or raw connection is refused. TLS goes
# end to end: the relay passes bytes, never sees keys.
#
# perl-base only (IO::Socket::IP, IO::Socket::UNIX).
use strict;

my @SIGNALS = qw(TERM INT HUP QUIT);

my ($side, @rest) = @ARGV;
die "usage: sandbox.pl outside|inside [--seccomp FILE] [RELAY_DIR] -- COMMAND...\n" unless ($side // '') =~ /\A(outside|inside)\z/;
my $seccomp_file;
$seccomp_file = (splice(@rest, 0, 2))[1] if ($rest[0] // '') eq '--seccomp';
my $relay = $rest[0] ne '--' ? shift @rest : undef;
shift @rest if ($rest[0] // '') eq '--';
die "sandbox.pl: no command\n" unless @rest;

my ($info_r, $info_w, $seccomp);
if ($side eq 'outside') {
  $SIG{$_} = 'IGNORE' for @SIGNALS;
  # bwrap names its first process (pid 1 of the sandbox) on --info-fd. bwrap exits as soon as the
  # agent has, and that process, re-parented to the pane supervisor, a moment later: waited for
  # below, so that the supervisor never counts it as something the agent left running.
  local $^F = 1 << 20;    # not close-on-exec: bwrap writes it
  pipe($info_r, $info_w) or die "sandbox.pl: pipe: $!\n";
  splice(@rest, 1, 0, '--info-fd', fileno $info_w);
  if (defined $seccomp_file) {
    open($seccomp, '<:raw', $seccomp_file) or die "sandbox.pl: cannot read $seccomp_file: $!\n";
    splice(@rest, 1, 0, '--seccomp', fileno $seccomp);
  }
} else {
  $SIG{$_} = 'DEFAULT' for @SIGNALS;
  exec { $rest[0] } @rest or die "sandbox.pl: cannot run $rest[0]: $!\n" unless defined $relay;
  # The relay in the sandbox outlives the agent's TERM like the one outside; the agent gets the default.
  $SIG{$_} = 'IGNORE' for @SIGNALS;
}
my $status = serve($side, $relay, @rest);
wait_gone(sandbox_pid()) if $side eq 'outside';
exit $status;

# The pid bwrap gave on --info-fd (`"child-pid": N`), once it has exited; undef without one.
sub sandbox_pid {
  close $info_w;
  local $/;
  my $info = <$info_r> // '';
  return $info =~ /"child-pid"\s*:\s*([0-9]+)/ ? $1 : undef;
}

# Until `pid` is gone or a zombie (its reaper is the supervisor), at most 5 s.
sub wait_gone {
  my ($pid) = @_;
  return unless $pid;
  for (1 .. 500) {
    open(my $fh, '<', "/proc/$pid/stat") or return;
    my $stat = <$fh> // '';
    return if $stat =~ /\A\d+ \(.*\) [ZX] /s;
    select(undef, undef, undef, 0.01);
  }
}

# Listens on this side's ends of the routes (with RELAY_DIR), runs the command, passes connections
# until it exits; returns its exit status (a signal as 128 + its number, as a shell says it).
sub serve {
  my ($side, $dir, @command) = @_;
  my (%listeners, %allowed);
  listen_routes($side, $dir, \%listeners, \%allowed) if defined $dir;
  # The command's end wakes the loop through a self-pipe (a signal between the check and select
  # would otherwise wait for the backstop).
  pipe(my $chld_r, my $chld_w) or die "sandbox.pl: pipe: $!\n";
  $SIG{CHLD} = sub { syswrite($chld_w, 'x') };
  my $pid = fork() // die "sandbox.pl: fork: $!\n";
  if ($pid == 0) {
    close $_->{sock} for values %listeners;
    close $_ for $chld_r, $chld_w, grep { defined } $info_r;
    $SIG{CHLD} = 'DEFAULT';
    $SIG{$_} = 'DEFAULT' for $side eq 'inside' ? @SIGNALS : ();
    exec { $command[0] } @command or print STDERR "sandbox.pl: cannot run $command[0]: $!\n";
    require POSIX;
    POSIX::_exit($! == 2 ? 127 : 126);
  }
  # The agent's output pipes are the agent's: a relay that held them would keep its log open.
  close $_ for grep { defined } $info_w, $seccomp;
  open(STDOUT, '>', '/dev/null');
  open(STDERR, '>', '/dev/null') if $side eq 'inside';
  my (%handlers, $status);
  while (1) {
    my $rin = '';
    vec($rin, $_, 1) = 1 for keys %listeners, fileno $chld_r;
    my $n = select(my $rout = $rin, undef, undef, 1);
    sysread($chld_r, my $junk, 64) if $n > 0 && vec($rout, fileno $chld_r, 1);
    while ((my $r = waitpid(-1, 1)) > 0) {
      if ($r == $pid) { $status = $? }
      else { delete $handlers{$r} }
    }
    last if defined $status;
    next unless $n > 0;
    for my $fd (grep { vec($rout, $_, 1) } keys %listeners) {
      my $l = $listeners{$fd};
      my $client = $l->{sock}->accept() or next;
      my $h = fork();
      if (!defined $h) { close $client; next }
      if ($h == 0) {
        close $_->{sock} for values %listeners;
        $SIG{$_} = 'DEFAULT' for @SIGNALS;
        if ($l->{proxy}) { proxy($client, \%allowed) }
        else { pass_through($client, connect_to($l->{to})) }
        require POSIX;
        POSIX::_exit(0);
      }
      $handlers{$h} = 1;
      close $client;
    }
  }
  kill 'KILL', keys %handlers;
  1 while waitpid(-1, 0) > 0;
  unlink grep { /\.sock\z/ } glob("$dir/*") if $side eq 'outside' && defined $dir;
  return $status & 127 ? 128 + ($status & 127) : $status >> 8;
}

# Opens this side's listeners of RELAY_DIR/routes into %$listeners (fd → socket and where its
# connections go), and the allowed host:port → unix socket map the proxy checks into %$allowed.
sub listen_routes {
  my ($side, $dir, $listeners, $allowed) = @_;
  require IO::Socket::IP;
  require IO::Socket::UNIX;
  open(my $fh, '<', "$dir/routes") or die "sandbox.pl: cannot read $dir/routes: $!\n";
  my $listen = sub {
    my ($what, $sock, $how) = @_;
    die "sandbox.pl: cannot listen for $what: $!\n" unless $sock;
    $listeners->{ fileno $sock } = { sock => $sock, %$how };
  };
  while (my $line = <$fh>) {
    chomp $line;
    my ($kind, @f) = split /\t/, $line;
    if ($kind eq 'route' && @f == 4) {
      my ($i, $host, $port, $at) = @f;
      $allowed->{ lc "$host:$port" } = "$dir/$i.sock";
      if ($side eq 'outside') {
        $listen->("$host:$port", IO::Socket::UNIX->new(Type => IO::Socket::SOCK_STREAM(), Local => "$dir/$i.sock", Listen => 64),
          { to => [$host, $port] });
      } elsif ($at ne '-') {
        my $note = $port < 1024 ? ' (a port below 1024 needs root: name the host, or use a higher port)' : '';
        $listen->("$host:$port$note", IO::Socket::IP->new(LocalHost => $at, LocalPort => $port, Listen => 64, ReuseAddr => 1),
          { to => "$dir/$i.sock" });
      }
    } elsif ($kind eq 'proxy' && @f == 2 && $side eq 'inside') {
      $listen->("the proxy", IO::Socket::IP->new(LocalHost => $f[0], LocalPort => $f[1], Listen => 64, ReuseAddr => 1),
        { proxy => 1 });
    }
  }
  close $fh;
}

# A TCP connection to [HOST, PORT], or a unix socket's by its path; undef when it cannot be made.
sub connect_to {
  my ($to) = @_;
  return ref $to
    ? IO::Socket::IP->new(PeerHost => $to->[0], PeerPort => $to->[1], Timeout => 30)
    : IO::Socket::UNIX->new(Type => IO::Socket::SOCK_STREAM(), Peer => $to);
}

# One proxy client: its request's head names where to; an allowed route is connected (CONNECT gets
# its 200, a plain request goes on as it came), anything else gets a 403.
sub proxy {
  my ($client, $allowed) = @_;
  my $head = '';
  while ($head !~ /\r?\n\r?\n/ && length $head < 65536) {
    my $got = sysread($client, $head, 4096, length $head);
    return unless $got;
  }
  my ($method, $target) = $head =~ /\A(\S+) (\S+) HTTP\/1\.[01]\r?\n/ or return refuse($client, 400, 'not an HTTP request');
  my ($host, $port) = uc $method eq 'CONNECT'
    ? $target =~ /\A\[?([^\]\/]+?)\]?:([0-9]+)\z/
    : $target =~ m{\Ahttp://\[?([^\]/:]+)\]?(?::([0-9]+))?(?:/|\z)}i;
  return refuse($client, 400, "cannot tell where $target is") unless defined $host;
  $port //= 80;
  my $sock = $allowed->{ lc "$host:$port" };
  return refuse($client, 403, "$host:$port is not on the sandbox's allowlist") unless $sock;
  my $server = connect_to($sock) or return refuse($client, 502, "cannot reach $host:$port");
  if (uc $method eq 'CONNECT') {
    syswrite($client, "HTTP/1.1 200 Connection established\r\n\r\n");
    # What the client sent after its request is already the tunnel's.
    my (undef, $rest) = split /\r?\n\r?\n/, $head, 2;
    syswrite($server, $rest) if length($rest // '');
  } else {
    syswrite($server, $head);
  }
  pass_through($client, $server);
}

sub refuse {
  my ($client, $code, $why) = @_;
  my $body = "termorch sandbox: $why\n";
  syswrite($client, "HTTP/1.1 $code termorch sandbox\r\nContent-Type: text/plain\r\nContent-Length: "
      . length($body) . "\r\nConnection: close\r\n\r\n$body");
}

# Bytes both ways until both sides are done.
sub pass_through {
  my ($client, $server) = @_;
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
