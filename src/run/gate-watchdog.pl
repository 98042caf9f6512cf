#!/usr/bin/perl
# termorch's gate watchdog: runs one `tests_cmd` so that it cannot outlive the termorch process
# that started it.
#
#   perl gate-watchdog.pl GRACE_MS UNSET_BADLANG COMMAND ARG...
#
# fd 0 is a pipe from termorch, which never writes to it: EOF means termorch is gone (killed,
# crashed), and the gate's whole process group is ended (TERM, then KILL after GRACE_MS).
# fd 3 is a pipe to termorch: "pid N" once the command runs (N is also its process group), then
# "status S" (the wait status) when it has ended. We exit 0 once that is reported, and 70 when
# there is no status to report (termorch is gone, the command could not be reaped, the report
# failed). The command leads a process group of its own (termorch signals it for a timeout or a
# cancel), with stdin from /dev/null and our stdout and stderr. Whatever of its group outlives
# it is ended before we exit. UNSET_BADLANG=1: termorch set PERL_BADLANG for us (a missing
# locale must not put perl's warning in the gate's log); the command does not get it. Only
# perl-base, no modules.
use strict;
use warnings;

my ($grace_ms, $unset_badlang, @command) = @ARGV;
die "usage: gate-watchdog.pl GRACE_MS UNSET_BADLANG COMMAND ARG...\n" unless @command;
delete $ENV{PERL_BADLANG} if $unset_badlang;
open(my $report, '>&=', 3) or die "gate watchdog: no status pipe on fd 3: $!\n";
$report->autoflush(1);

# SIGCHLD only has to interrupt the select below; the select's timeout covers a child that
# ends just before it.
$SIG{CHLD} = sub { };
$SIG{PIPE} = 'IGNORE';

my $pid = fork();
die "gate watchdog: fork: $!\n" unless defined $pid;
if ($pid == 0) {
  setpgrp(0, 0);
  close $report;
  open(STDIN, '<', '/dev/null');
  $SIG{$_} = 'DEFAULT' for qw(CHLD PIPE);
  { exec { $command[0] } @command }
  print STDERR "termorch: cannot run $command[0]: $!\n";
  exit 127;
}
# The parent sets the group too, so that it exists before termorch learns the pid.
setpgrp($pid, $pid);
print $report "pid $pid\n";

my ($status, $orphaned) = (undef, 0);
while (1) {
  my $r = waitpid($pid, 1);    # WNOHANG is 1 on Linux, macOS and the BSDs
  if ($r == $pid) { $status = $?; last }
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

# End what is left of the command's group: everything of it, when termorch is gone. The
# command itself is reaped first: as a zombie it would keep the group alive.
kill 'TERM', -$pid;
for (my $waited = 0; ; $waited += 20) {
  if (!defined $status && waitpid($pid, 1) == $pid) { $status = $? }
  last if (defined $status && !kill(0, -$pid)) || $waited >= $grace_ms;
  select(undef, undef, undef, 0.02);
}
kill 'KILL', -$pid;
if (!defined $status && waitpid($pid, 0) == $pid) { $status = $? }
# Our own exit code is never the gate's result: without a reported status termorch fails the gate.
my $reported = defined $status && !$orphaned && print $report "status $status\n";
exit($reported ? 0 : 70);
