#!/usr/bin/perl
# termorch's pane logger for tty agents: pipe-pane feeds it the pane's output, and it writes the
# redacted, capped stdout log with the supervisor's log engine (src/redact/RULES.md).
#
#   perl pane-logger.pl ATTEMPT_DIR   (started by pipe-pane; reads and deletes ATTEMPT_DIR/filter)
#
# The supervisor prints an OSC sequence carrying the attempt's token once the agent is gone (tmux
# swallows unknown OSC sequences); the logger logs everything before it, reports its byte count
# in filter.done (tmp + rename) and exits. docs/ARCHITECTURE.md has the whole contract.
use strict;

(my $here = __FILE__) =~ s{[^/]*\z}{};
require "${here}supervisor.pl";

my $dir = $ARGV[0] // die "usage: pane-logger.pl ATTEMPT_DIR\n";
# tmux closes our stdin when the pane goes; a hangup must not cut the final flush short.
$SIG{HUP} = $SIG{PIPE} = 'IGNORE';
my $spec = read_settings("$dir/filter");
use_patterns($spec->{redact});    # the supervisor fails closed on a bad one
my $log = log_open($spec->{stdout_log}, $spec->{max_log_bytes});
my $marker = "\e]7777;termorch-end:$spec->{token}\a";

# The terminal turns every "\n" into "\r\n"; the transcript keeps plain newlines, like the tty=0
# logs. A "\r" alone (a progress line redrawn in place) is kept: `cat` shows the final state. A
# "\r" ending a read waits for the next, which may start with its "\n".
my ($cr, $bytes, $pending, $end) = ('', 0, '', 0);
sub feed {
  $bytes += length $_[0];
  my $text = $cr . $_[0];
  $cr = $text =~ s/(\r+)\z// ? $1 : '';
  log_feed($log, $text =~ s/\r+\n/\n/gr);
}

while (!$end && sysread(STDIN, my $data, 1 << 20)) {
  $pending .= $data;
  # Holds back only a tail that could begin a marker cut by a read.
  my $keep = length($pending) < length($marker) ? length($pending) : length($marker) - 1;
  $keep-- while $keep > 0 && substr($pending, -$keep) ne substr($marker, 0, $keep);
  my $at = index($pending, $marker);
  ($end, $keep) = (1, length($pending) - $at) if $at >= 0;
  feed(substr($pending, 0, length($pending) - $keep, '')) if length($pending) > $keep;
}
feed($pending) unless $end;
log_feed($log, $cr);
log_close($log);
my $report = "bytes=$bytes\ntruncated=$log->{truncated}\n";
$report .= 'error=' . ($log->{failed} =~ s/\n/ /gr) . "\n" if $log->{failed};
write_atomic("$dir/filter.done", $report);
