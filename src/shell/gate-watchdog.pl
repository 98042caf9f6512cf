#!/usr/bin/perl
# termorch's gate watchdog: runs one `tests_cmd` so that it cannot outlive the termorch process
# that started it.
#
#   perl gate-watchdog.pl GRACE_MS UNSET_BADLANG RECORD COMMAND ARG...
#
# fd 0 is a pipe from termorch, which never writes to it: EOF means termorch is gone (killed,
# crashed), and everything the gate started is ended (TERM, then KILL after GRACE_MS).
# fd 3 is a pipe to termorch: "pid N" once the command runs (N is also its process group), then
# "status S" (the wait status) when it has ended. RECORD (empty: none) is the file that records
# the group for a resumed run (contract/gate-record.ts): written here, before the command starts,
# so that a termorch killed at any moment never leaves a gate no resume knows of. We exit 0 once that is reported, and 70 when
# there is no status to report (termorch is gone, the command could not be reaped, the report
# failed). The command leads a process group of its own (termorch signals it for a timeout or a
# cancel), with stdin from /dev/null and our stdout and stderr. Whatever it started that outlives
# it is ended before we exit: its group, and on Linux every process below us, even those that left
# the group and session (setsid). UNSET_BADLANG=1: termorch set PERL_BADLANG for us (a missing
# locale must not put perl's warning in the gate's log); the command does not get it. Only
# perl-base, no modules.
use strict;
use warnings;

my ($grace_ms, $unset_badlang, $record, @command) = @ARGV;
die "usage: gate-watchdog.pl GRACE_MS UNSET_BADLANG RECORD COMMAND ARG...\n" unless @command;
delete $ENV{PERL_BADLANG} if $unset_badlang;
open(my $report, '>&=', 3) or die "gate watchdog: no status pipe on fd 3: $!\n";
$report->autoflush(1);

# SIGCHLD only has to interrupt the select below; the select's timeout covers a child that
# ends just before it.
$SIG{CHLD} = sub { };
$SIG{PIPE} = 'IGNORE';

# Linux: PR_SET_CHILD_SUBREAPER (36), as the pane supervisor does for agents. What of the gate's
# tree loses its parent (a double fork, `setsid cmd &` in a shell that exits) is re-parented to us
# instead of init, so all of it stays below us, where members() finds it. Set before the fork:
# nothing of the gate exists yet that could escape. perl has no prctl: its syscall number on the
# two 64-bit Linux ABIs termorch runs on (x86-64, arm64), told apart by this perl's ELF header.
if ($^O eq 'linux' && open(my $exe, '<:raw', '/proc/self/exe')) {
  my $elf = '';
  my ($class, $machine) = sysread($exe, $elf, 20) == 20 ? unpack('x4 C x13 v', $elf) : (0, 0);
  my $prctl = $class == 2 ? { 62 => 157, 183 => 167 }->{$machine} : undef;
  syscall($prctl, 36, 1, 0, 0, 0) if $prctl;
}

# The command waits for the record (a byte on this pipe; EOF: we died first, and it never runs).
pipe(my $go_r, my $go_w) or die "gate watchdog: pipe: $!\n";
my $pid = fork();
die "gate watchdog: fork: $!\n" unless defined $pid;
if ($pid == 0) {
  setpgrp(0, 0);
  close $report;
  close $go_w;
  my ($go, $got) = ('');
  do { $got = sysread($go_r, $go, 1) } while (!defined $got && $!{EINTR});
  exit 125 unless $got;
  close $go_r;
  open(STDIN, '<', '/dev/null');
  $SIG{$_} = 'DEFAULT' for qw(CHLD PIPE);
  { exec { $command[0] } @command }
  print STDERR "termorch: cannot run $command[0]: $!\n";
  exit 127;
}
# The parent sets the group too, so that it exists before termorch learns the pid.
setpgrp($pid, $pid);
close $go_r;
write_record($record, $pid) if length $record;
syswrite($go_w, 'g');
close $go_w;
print $report "pid $pid\n";

my ($status, $orphaned) = (undef, 0);
while (1) {
  reap();
  last if defined $status;
  my $rin = '';
  vec($rin, 0, 1) = 1;
  my $n = select(my $rout = $rin, undef, undef, 0.5);
  next unless $n > 0;
  my $got = sysread(STDIN, my $junk, 64);
  next if defined $got && $got > 0;
  next if !defined $got && $!{EINTR};
  # EOF: termorch is gone, and nobody would ever end the gate.
  $orphaned = 1;
  last;
}

# End what is left of what the command started: everything of it, when termorch is gone. The
# command itself is reaped first: as a zombie it would keep the group alive.
signal_members('TERM');
for (my $waited = 0; ; $waited += 20) {
  reap();
  last if (defined $status && !members()) || $waited >= $grace_ms;
  select(undef, undef, undef, 0.02);
}
signal_members('KILL');
if (!defined $status && waitpid($pid, 0) == $pid) { $status = $? }
reap();
# Our own exit code is never the gate's result: without a reported status termorch fails the gate.
my $reported = defined $status && !$orphaned && print $report "status $status\n";
exit($reported ? 0 : 70);

# Reaps the command (its status is the gate's) and the orphans handed to us as its subreaper.
sub reap {
  while ((my $r = waitpid(-1, 1)) > 0) {    # WNOHANG is 1 on Linux, macOS and the BSDs
    $status = $? if $r == $pid && !defined $status;
  }
}

# The live processes the command started: its group, and every process below us (Linux /proc).
# Zombies are left out: they have ended, and ours are reaped.
sub members {
  opendir(my $dh, '/proc') or return kill(0, -$pid) ? (-$pid) : ();
  my (%children, %found);
  while (defined(my $e = readdir $dh)) {
    next unless $e =~ /\A[0-9]+\z/ && $e != $$;
    open(my $fh, '<', "/proc/$e/stat") or next;
    my $stat = <$fh>;
    close $fh;
    next unless defined $stat && $stat =~ /\A\d+ \(.*\) (\S) (-?\d+) (-?\d+)/s;
    next if $1 eq 'Z' || $1 eq 'X';
    push @{ $children{$2} }, $e;
    $found{$e} = 1 if $3 == $pid;
  }
  closedir $dh;
  my @below = ($$);
  while (defined(my $p = pop @below)) {
    for my $c (@{ $children{$p} || [] }) {
      $found{$c} = 1;
      push @below, $c;
    }
  }
  return keys %found;
}

sub signal_members {
  my ($sig) = @_;
  kill $sig, -$pid;
  kill $sig, members();
}

# The gate's record: its group, and when its leader started (ms since the epoch, as termorch's
# processStartMs computes it; null where /proc cannot tell), written atomically. Without it a
# resume cannot tell whether the gate still runs: the command still runs (and we still end it).
sub write_record {
  my ($path, $group) = @_;
  my $start = 'null';
  if (open(my $st, '<', "/proc/$group/stat") && open(my $sys, '<', '/proc/stat')) {
    my ($ticks) = (do { local $/; <$st> } // '') =~ /\)\s+(?:\S+\s+){19}(\d+)/;
    my ($btime) = (do { local $/; <$sys> } // '') =~ /^btime (\d+)$/m;
    $start = $btime * 1000 + $ticks * 10 if defined $ticks && defined $btime;    # USER_HZ 100
  }
  my $tmp = "$path.$$.tmp";
  my $old = umask 077;
  my $ok = open(my $fh, '>', $tmp);
  $ok &&= print($fh qq({"pgid":$group,"start":$start}\n)) && close($fh);
  umask $old;
  if ($ok) { rename($tmp, $path) or unlink($tmp) }
  else { unlink($tmp) }
}
