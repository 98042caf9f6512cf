#!/usr/bin/perl
# termorch's pane supervisor: runs one task attempt's agent inside its tmux pane, and does only
# what must outlive termorch there. Its contract with src/tmux/session.ts (files, signals, exit
# record) is in docs/ARCHITECTURE.md, "The supervisor in the pane"; its redaction and capping
# rules are in src/redact/RULES.md, which the TypeScript engine follows too.
#
#   perl supervisor.pl ATTEMPT_DIR            the pane's program (started by new-session)
#   perl supervisor.pl --filter ATTEMPT_DIR   tty mode's pane logger (started by pipe-pane)
#   perl supervisor.pl --log-frames FILE      the log engine alone, for the shared test corpus:
#                                             FILE holds stdout_log, max_log_bytes and redact=
#                                             lines; stdin is frames "LENGTH\n" + bytes, each
#                                             one read of the agent's output
#
# Only perl-base, and on the path every task takes only strict and Time::HiRes: each module
# costs CPU on every task (perl starts in ~1.5 ms; POSIX alone adds ~8, Fcntl and Errno ~1 each).
# Modules needed on rare paths (POSIX for tty agents, Config for signal names, Fcntl once there
# is output for the pane, Errno on errors) are loaded there. No `use warnings` (1.6 ms a task):
# a test compiles this file with `perl -w` instead.
use strict;

my $REDACTED = '[REDACTED]';
my $LINE_MAX = 1 << 20;     # a partial line longer than this is redacted and written as it is
my $READ_SIZE = 1 << 20;    # large reads: a fast agent costs fewer loop turns
my $PANE_MAX = 1 << 20;     # bytes queued for the pane; beyond that output is only logged
# Bytes per second shown in the pane at most, after a burst of $PANE_MAX. tmux spends a core on
# terminal emulation at ~40 MB/s, taken from the agent: 200 MB logged in 0.19 s instead of 0.33.
my $PANE_RATE = 2 << 20;
# How long leftovers still holding the output pipes after the agent's end may keep writing
# before they are ended (a background `(sleep 0.3; echo late) &`): capped by the grace.
my $SETTLE = 1;
# Exit codes for attempts whose agent never ran, after the shells' and env(1)'s conventions.
my ($EXIT_NOT_FOUND, $EXIT_CANNOT_EXEC, $EXIT_SETUP) = (127, 126, 125);

my $GRACE = 5;              # seconds from TERM to KILL: kill_grace_ms once the launch file is read
my $dir;                    # the attempt folder
my ($stdout_log, $stderr_log);
my @patterns;
my ($tty, $token) = (0, undef);
my $cgroup;                 # the agent's cgroup, while it exists

sub main {
  if (@ARGV == 2 && $ARGV[0] eq '--filter') { pane_logger($ARGV[1]) }
  if (@ARGV == 2 && $ARGV[0] eq '--log-frames') { log_frames($ARGV[1]) }
  die "usage: supervisor.pl ATTEMPT_DIR | --filter ATTEMPT_DIR | --log-frames FILE\n" unless @ARGV == 1;
  supervise($ARGV[0]);
}

# ---------------------------------------------------------------------------------------------
# Files

# Reads and deletes a launch/filter file (it holds secrets): key => value, except arg, env and
# redact, which are lists in file order. Values are %-encoded.
sub read_settings {
  my ($path) = @_;
  my $raw = slurp($path);
  die "cannot read $path: $!\n" unless defined $raw;
  unlink $path;
  my %spec = (arg => [], env => [], redact => []);
  for my $line (split /\n/, $raw) {
    next unless $line =~ /\A([a-z_]+)=(.*)\z/s;
    my ($key, $value) = ($1, $2);
    $value =~ s/%([0-9A-Fa-f]{2})/chr(hex $1)/ge;
    if (ref $spec{$key}) { push @{ $spec{$key} }, $value }
    else { $spec{$key} = $value }
  }
  return \%spec;
}

sub slurp {
  my ($path) = @_;
  open(my $fh, '<:raw', $path) or return undef;
  local $/;
  my $data = <$fh>;
  return defined $data ? $data : '';
}

# Writes all of $data, retrying short writes. False on an error.
sub write_all {
  my ($fh, $data) = @_;
  for (my $off = 0; $off < length $data;) {
    my $n = syswrite($fh, $data, length($data) - $off, $off);
    return 0 unless defined $n;
    $off += $n;
  }
  return 1;
}

# tmp + rename: a reader sees the whole file or none. Files are 0600 (umask 077, set in supervise).
sub write_atomic {
  my ($path, $data) = @_;
  my $tmp = "$path.tmp.$$";
  open(my $fh, '>:raw', $tmp) or return 0;
  my $ok = write_all($fh, $data);
  $ok = close($fh) && $ok;
  return 1 if $ok && rename($tmp, $path);
  unlink $tmp;
  return 0;
}

# perl has no built-in for prctl, setsid or a clock finer than a second, and the modules that
# have them cost CPU on every task (POSIX ~8 ms, Time::HiRes ~1.3; util-linux setsid(1) ~0.8 and
# the pid would change hands after the exec): their syscall numbers for the two 64-bit Linux ABIs
# termorch runs on, told apart by the ELF header of this perl. Elsewhere the modules are loaded,
# and there is no subreaper.
my %SYSCALLS = (
  62  => { prctl => 157, setsid => 112, gettimeofday => 96 },     # x86-64
  183 => { prctl => 167, setsid => 157, gettimeofday => 169 },    # arm64
);
my $syscalls = do {
  my ($elf, $class, $machine) = ('', 0, 0);
  if ($^O eq 'linux' && open(my $exe, '<:raw', '/proc/self/exe')) { sysread($exe, $elf, 20) }
  ($class, $machine) = unpack('x4 C x13 v', $elf) if $elf =~ /\A\x7fELF/;
  $class == 2 ? $SYSCALLS{$machine} : undef;    # 2: 64-bit
};

# Seconds since the epoch, to the microsecond.
sub now {
  if ($syscalls) {
    my $tv = pack('q q', 0, 0);
    if (syscall($syscalls->{gettimeofday}, $tv, 0) == 0) {
      my ($s, $us) = unpack('q q', $tv);
      return $s + $us / 1e6;
    }
  }
  require Time::HiRes;
  return Time::HiRes::time();
}

sub now_iso {
  my $t = now();
  my @g = gmtime(int $t);
  return sprintf('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ',
    $g[5] + 1900, $g[4] + 1, $g[3], $g[2], $g[1], $g[0], ($t - int $t) * 1000);
}

# ---------------------------------------------------------------------------------------------
# Redaction and capped logs (src/redact/RULES.md)

# Compiles the patterns. Returns (patterns, error message or undef).
sub compile_patterns {
  my ($sources) = @_;
  my @out;
  for my $i (0 .. $#$sources) {
    my $src = $sources->[$i];
    next if $src eq '';
    # Interpolated patterns cannot run code: (?{ }) needs `use re 'eval'`, which is off.
    my $re = eval { qr/$src/ };
    if (!$re) {
      (my $why = $@) =~ s/ at \S+ line \d+.*//s;
      return (\@out, 'redaction pattern ' . ($i + 1) . " does not compile: $why");
    }
    # A speed-up only: one search of a whole chunk of lines with /m (^ and $ still see line
    # ends) tells whether the pattern can match any line in it; most chunks hold no secret, and
    # a loop over every line costs ~30x the copy. Whatever matches a line alone matches in the
    # chunk too, except with string anchors, negative lookaround, dotall or backtracking verbs:
    # those patterns always take the per-line loop.
    my $pre = $src =~ /\\[AzZG]|\(\?<?!|\(\?\^?[a-z]*s|\(\*/ ? undef : eval { qr/$src/m };
    push @out, { re => $re, pre => $pre };
  }
  return (\@out, undef);
}

my $KEY_BEGIN = qr/-----BEGIN [A-Z ]*PRIVATE KEY-----/;
my $KEY_END = qr/-----END [A-Z ]*PRIVATE KEY-----/;

# Redacts whole lines (a flushed partial line counts as one). $in_key carries the private-key
# block state of a stream from one call to the next.
sub redact_lines {
  my ($text, $in_key) = @_;
  return $text unless @patterns;
  if ($$in_key || index($text, 'PRIVATE KEY-----') >= 0) {
    my @lines = split /(?<=\n)/, $text;
    for my $line (@lines) {
      my $nl = $line =~ s/\n\z// ? "\n" : '';
      if ($$in_key) {
        $$in_key = 0 if $line =~ s/\A.*?$KEY_END/$REDACTED/;
        $line = $REDACTED if $$in_key;
      } elsif ($line =~ /$KEY_BEGIN/ && $line !~ /$KEY_BEGIN.*?$KEY_END/) {
        $line =~ s/$KEY_BEGIN.*/$REDACTED/;
        $$in_key = 1;
      }
      $line .= $nl;
    }
    $text = join '', @lines;
  }
  for my $p (@patterns) {
    next if $p->{pre} && $text !~ $p->{pre};
    my $re = $p->{re};
    my @lines = split /(?<=\n)/, $text;
    for my $line (@lines) {
      my $nl = $line =~ s/\n\z// ? "\n" : '';
      # An empty match hides nothing: it is replaced by nothing, not by a marker.
      $line =~ s/$re/length($&) ? $REDACTED : ''/ge;
      $line .= $nl;
    }
    $text = join '', @lines;
  }
  return $text;
}

# A log file: appended to (an earlier writer's lines stay), capped at max bytes counting what the
# file already held, fed redacted whole lines.
sub log_open {
  my ($path, $max) = @_;
  my $log = { path => $path, max => $max || 0, written => 0, truncated => 0, pending => '', in_key => 0 };
  if (open(my $fh, '>>:raw', $path)) {
    $log->{fh} = $fh;
    $log->{written} = -s $fh || 0;
  } else {
    $log->{failed} = "cannot open $path: $!";
  }
  return $log;
}

# Writes redacted bytes, up to the cap; the first byte over it writes the marker instead.
sub log_write {
  my ($log, $data) = @_;
  return if !$log->{fh} || $log->{truncated} || $data eq '';
  my $room = $log->{max} > 0 ? $log->{max} - $log->{written} : length $data;
  $room = 0 if $room < 0;    # an appended file may already hold more than the cap
  my $ok;
  if (length($data) <= $room) {
    $ok = write_all($log->{fh}, $data);
    $log->{written} += length $data;
  } else {
    $ok = write_all($log->{fh}, substr($data, 0, $room) . "\n[termorch: log truncated at $log->{max} bytes]\n");
    $log->{truncated} = 1;
  }
  if (!$ok) {
    $log->{failed} = "writing $log->{path} failed: $!";
    close delete $log->{fh};
  }
}

# Output of the agent: whole lines are redacted and written; a partial line waits for its end,
# unless it grows past $LINE_MAX.
sub log_feed {
  my ($log, $data) = @_;
  $log->{pending} .= $data;
  my $cut = rindex($log->{pending}, "\n") + 1;
  $cut = length $log->{pending} if length($log->{pending}) - $cut > $LINE_MAX;
  log_write($log, redact_lines(substr($log->{pending}, 0, $cut, ''), \$log->{in_key})) if $cut > 0;
}

sub log_close {
  my ($log) = @_;
  return unless $log;
  log_write($log, redact_lines($log->{pending}, \$log->{in_key})) if $log->{pending} ne '';
  $log->{pending} = '';
  close delete $log->{fh} if $log->{fh};
}

# The test entry: the same engine, fed frames exactly as the corpus cuts them.
sub log_frames {
  my ($file) = @_;
  my $spec = read_settings($file);
  my ($pats, $error) = compile_patterns($spec->{redact});
  die "$error\n" if $error;
  @patterns = @$pats;
  my $log = log_open($spec->{stdout_log}, $spec->{max_log_bytes});
  binmode STDIN;
  while (defined(my $len = <STDIN>)) {
    read(STDIN, my $chunk, $len) == $len or die "short frame\n";
    log_feed($log, $chunk);
  }
  log_close($log);
  die "$log->{failed}\n" if $log->{failed};
  exit 0;
}

# ---------------------------------------------------------------------------------------------
# The pane

my ($pane_queue, $pane_ok, $pane_dropped, $pane_tokens, $pane_clock, $pane_nonblocking) = ('', 1, 0, $PANE_MAX);

# Bytes for the pane. tty=0: queued and written when the pane can take them, never blocking the
# agent (the log is the record; what a slow pane cannot take is dropped, with one note). tty=1:
# the agent shares the terminal, its flags stay untouched, and we write directly.
sub pane_put {
  my ($data, $always) = @_;
  return unless $pane_ok;
  if ($tty) {
    $pane_ok = 0 unless write_all(\*STDERR, $data);
    return;
  }
  my $now = now();
  $pane_tokens += ($now - $pane_clock) * $PANE_RATE if defined $pane_clock;
  $pane_tokens = $PANE_MAX if $pane_tokens > $PANE_MAX;
  $pane_clock = $now;
  if (length($pane_queue) + length($data) > $PANE_MAX || (!$always && length($data) > $pane_tokens)) {
    $pane_dropped += length $data;
    return;
  }
  $pane_tokens -= length $data;
  $pane_queue .= $data;
}

sub pane_flush_some {
  return unless $pane_ok && length $pane_queue;
  if (!$pane_nonblocking) {
    # Only once there is something to show: tasks that print nothing never load Fcntl.
    require Fcntl;
    fcntl(STDOUT, Fcntl::F_SETFL(), fcntl(STDOUT, Fcntl::F_GETFL(), 0) | Fcntl::O_NONBLOCK());
    $pane_nonblocking = 1;
  }
  my $n = syswrite(STDOUT, $pane_queue);
  if (defined $n) {
    substr($pane_queue, 0, $n, '');
  } else {
    my $errno = $! + 0;
    require Errno;
    # EIO: the pane is gone (session killed). Keep logging, stop showing.
    ($pane_ok, $pane_queue) = (0, '') unless $errno == Errno::EAGAIN() || $errno == Errno::EINTR();
  }
  if ($pane_queue eq '' && $pane_dropped) {
    $pane_queue = "\r\n[termorch: $pane_dropped bytes not shown here; the log has them all]\r\n";
    $pane_dropped = 0;
  }
}

# Flushes the pane queue, waiting for the pane at most the grace.
sub pane_drain {
  my $end = now() + $GRACE;
  while ($pane_ok && length $pane_queue) {
    my $left = $end - now();
    last if $left <= 0;
    my $win = '';
    vec($win, 1, 1) = 1;
    select(undef, $win, undef, $left);
    pane_flush_some();
  }
}

# termorch's own messages: the pane and the stderr log.
sub note {
  my ($msg) = @_;
  my $in_key = 0;
  log_write($stderr_log, redact_lines("termorch: $msg\n", \$in_key)) if $stderr_log;
  pane_put("termorch: $msg\r\n", 1);
}

# tty mode's pane logger (pipe-pane feeds it the pane's output): writes the redacted, capped
# stdout log. The supervisor prints an OSC sequence carrying the attempt's token once the agent
# is gone (tmux swallows unknown OSC sequences); the logger logs everything before it, reports
# in filter.done and exits.
sub pane_logger {
  ($dir) = @_;
  # tmux closes our stdin when the pane goes; a hangup must not cut the final flush short.
  $SIG{HUP} = 'IGNORE';
  $SIG{PIPE} = 'IGNORE';
  my $spec = read_settings("$dir/filter");
  @patterns = @{ (compile_patterns($spec->{redact}))[0] };
  my $log = log_open($spec->{stdout_log}, $spec->{max_log_bytes});
  my $marker = "\e]7777;termorch-end:$spec->{token}\a";
  # The terminal turns every "\n" into "\r\n"; the transcript keeps plain newlines, like the
  # tty=0 logs. A "\r" alone (a progress line redrawn in place) is kept: `cat` shows the final
  # state. A "\r" ending a read waits for the next, which may start with its "\n".
  my ($cr, $bytes, $pending) = ('', 0, '');
  my $feed = sub {
    my $text = $cr . $_[0];
    $cr = $text =~ s/(\r+)\z// ? $1 : '';
    $text =~ s/\r+\n/\n/g;
    $bytes += length($_[0]);
    log_feed($log, $text);
  };
  while (1) {
    my $n = sysread(STDIN, my $data, $READ_SIZE);
    last unless $n;
    $pending .= $data;
    my $at = index($pending, $marker);
    if ($at >= 0) {
      $feed->(substr($pending, 0, $at));
      $pending = $marker;
      last;
    }
    # Hold back only a tail that could begin a marker split across reads.
    my $keep = length($marker) - 1;
    $keep-- while $keep > 0 && substr($pending, -$keep) ne substr($marker, 0, $keep);
    $feed->(substr($pending, 0, length($pending) - $keep, '')) if length($pending) > $keep;
  }
  $feed->($pending) if $pending ne $marker;
  log_feed($log, $cr);
  log_close($log);
  my $report = "bytes=$bytes\ntruncated=$log->{truncated}\n";
  $report .= 'error=' . ($log->{failed} =~ s/\n/ /gr) . "\n" if $log->{failed};
  write_atomic("$dir/filter.done", $report);
  exit 0;
}

# tty mode: lets the pane logger log everything the pane got, then takes its count.
# Bounded by the grace: pipe-pane may have failed to start.
sub finish_pane_log {
  my ($result) = @_;
  write_all(\*STDOUT, "\e]7777;termorch-end:$token\a") if $pane_ok;
  my $end = now() + $GRACE;
  my $done;
  until (defined($done = slurp("$dir/filter.done")) || now() > $end) {
    select(undef, undef, undef, 0.01);
  }
  unlink "$dir/filter";
  return note('the pane output logger did not finish; the stdout log may be incomplete') unless defined $done;
  $result->{stdout_bytes} = $1 if $done =~ /^bytes=(\d+)$/m;
  $result->{truncated} = 1 if $done =~ /^truncated=1$/m;
  note("the pane output logger failed: $1") if $done =~ /^error=(.*)$/m;
}

# ---------------------------------------------------------------------------------------------
# The agent's processes

# PR_SET_CHILD_SUBREAPER: whatever of the agent's tree loses its parent is re-parented to us, not
# to init, so all of it stays below us, where group_members finds it, and an empty list of our
# children proves that nothing is left.
sub become_subreaper {
  return $syscalls && syscall($syscalls->{prctl}, 36, 1, 0, 0, 0) == 0;
}

sub new_session {
  return if $syscalls && syscall($syscalls->{setsid}) == $$;
  require POSIX;
  POSIX::setsid();
}

# Live (non-zombie) processes of the agent: those of its process group, or session (tty=0: a
# job-control shell in it may have moved children to groups of their own); those below us (as
# the subreaper we inherit what left the session); and those in its cgroup. Zombies are left
# out: nothing may ever reap them (a container's init often does not).
sub group_members {
  my ($id, $with_session) = @_;
  opendir(my $dh, '/proc') or return kill(0, -$id) ? (-$id) : ();
  my (%children, %found);
  while (defined(my $e = readdir $dh)) {
    next unless $e =~ /\A[0-9]+\z/ && $e != $$;
    open(my $fh, '<', "/proc/$e/stat") or next;
    my $stat = <$fh>;
    next unless defined $stat && $stat =~ /\A\d+ \(.*\) (\S) (-?\d+) (-?\d+) (-?\d+)/s;
    next if $1 eq 'Z' || $1 eq 'X';
    push @{ $children{$2} }, $e;
    $found{$e} = 1 if $3 == $id || ($with_session && $4 == $id);
  }
  my @below = ($$);
  while (defined(my $p = pop @below)) {
    for my $c (@{ $children{$p} || [] }) {
      $found{$c} = 1;
      push @below, $c;
    }
  }
  $found{$_} = 1 for cgroup_procs();
  return keys %found;
}

sub signal_group {
  my ($sig, $id, $with_session) = @_;
  kill $sig, -$id;
  kill $sig, group_members($id, $with_session);
  if ($sig eq 'KILL' && defined $cgroup && open(my $fh, '>', "$cgroup/cgroup.kill")) {
    print $fh "1\n";
  }
}

# Ends what is left of the agent: TERM, then KILL after the grace, then at most a grace more for
# the kernel to take it away. Returns how many processes were left.
sub end_leftovers {
  my ($id, $with_session, $subreaper) = @_;
  # As the subreaper, no child of ours left means nothing of the agent is left: no /proc scan.
  return 0 if $subreaper && !have_children();
  my $left = () = group_members($id, $with_session);
  return 0 unless $left;
  signal_group('TERM', $id, $with_session);
  my $kill_at = now() + $GRACE;
  my $killed = 0;
  while (group_members($id, $with_session) && now() < $kill_at + $GRACE) {
    select(undef, undef, undef, 0.02);
    next if $killed || now() < $kill_at;
    signal_group('KILL', $id, $with_session);
    $killed = 1;
  }
  return $left;
}

sub have_children {
  my $list = slurp("/proc/$$/task/$$/children");
  return !defined $list || $list =~ /[0-9]/;
}

# Linux, cgroup v2: where we may create one (root, or a delegated subtree of our own), the agent
# gets a cgroup of its own, and whatever it starts stays in it, whatever its session or parent;
# `termorch clean` finds it through its record even if we were killed. Anything that fails
# leaves the agent where it is.
sub enter_cgroup {
  my ($pid, $record, $name) = @_;
  open(my $mi, '<', '/proc/self/mountinfo') or return;
  my $mount;
  while (my $line = <$mi>) {
    # Only a mount of the hierarchy's root: our path in /proc/self/cgroup is relative to it.
    next unless $line =~ /\A\S+ \S+ \S+ \/ (\S+) .* - cgroup2 /;
    ($mount = $1) =~ s/\\([0-7]{3})/chr(oct $1)/ge;
    last;
  }
  my ($path) = map { /\A0::(\/.*)\n?\z/ ? $1 : () } split /(?<=\n)/, slurp('/proc/self/cgroup') // '';
  return unless defined $mount && defined $path && $path !~ / \(deleted\)\z/;
  my $target = $mount . ($path eq '/' ? '' : $path) . "/$name";
  mkdir($target) or return;
  my $ok = open(my $fh, '>', "$target/cgroup.procs");
  $ok &&= syswrite($fh, "$pid\n");
  if (!$ok || !write_atomic($record, "$target\n")) {
    rmdir $target;
    return;
  }
  $cgroup = $target;
}

sub cgroup_procs {
  return () unless defined $cgroup && defined(my $procs = slurp("$cgroup/cgroup.procs"));
  return grep { $_ != $$ } $procs =~ /^(\d+)/mg;
}

# Removes the agent's cgroup once it is empty (KILLing what is left there, atomically against
# forks where cgroup.kill exists), then its record.
sub leave_cgroup {
  my ($record) = @_;
  return unless defined $cgroup;
  my $end = now() + $GRACE;
  until (rmdir($cgroup) || now() > $end) {
    if (open(my $fh, '>', "$cgroup/cgroup.kill")) { print $fh "1\n" }
    kill 'KILL', cgroup_procs();
    select(undef, undef, undef, 0.01);
  }
  unlink $record unless -d $cgroup;
  $cgroup = undef;
}

sub find_in_path {
  my ($name, @extra) = @_;
  for my $d ((split /:/, $ENV{PATH} || ''), @extra) {
    return "$d/$name" if $d ne '' && -f "$d/$name" && -x _;
  }
  return undef;
}

# Whether execvp would find $name with the agent's PATH (execvp's default when unset).
sub resolve_command {
  my ($name) = @_;
  return -e $name if index($name, '/') >= 0;
  for my $d (split /:/, $ENV{PATH} // '/bin:/usr/bin', -1) {
    return 1 if -f (($d eq '' ? '.' : $d) . "/$name") && -x _;
  }
  return 0;
}

sub signal_name {
  my ($n) = @_;
  require Config;    # only for an agent ended by a signal
  my $name = (split ' ', do { no strict 'refs'; ${'Config::Config'}{sig_name} })[$n];
  return 'SIG' . (defined $name ? $name : $n);
}

# ---------------------------------------------------------------------------------------------
# The exit record: exit.json, keys and types as session.ts's ExitFile schema reads them.

sub json_str {
  my ($s) = @_;
  return 'null' unless defined $s;
  # JSON text is UTF-8: bytes that are not become U+FFFD.
  utf8::decode($s) or $s =~ s/[\x80-\xff]/\x{fffd}/g;
  $s =~ s/(["\\])/\\$1/g;
  $s =~ s/([\x00-\x1f])/sprintf('\\u%04x', ord $1)/ge;
  utf8::encode($s);
  return qq("$s");
}

sub write_exit {
  my (%f) = @_;
  my $in_key = 0;
  my $error = defined $f{error} ? redact_lines($f{error}, \$in_key) : undef;
  my $json = sprintf(
    '{"exit_code":%s,"signal":%s,"started_at":%s,"finished_at":%s,"pid":%s,"stdout_bytes":%d,'
      . '"stderr_bytes":%d,"truncated":%s,"hangup":%s,"launch_failed":%s,"error":%s}' . "\n",
    $f{exit_code} // 'null', json_str($f{signal}), json_str($f{started_at}),
    json_str($f{finished_at} // now_iso()), $f{pid} // 'null', $f{stdout_bytes} || 0, $f{stderr_bytes} || 0,
    (map { $f{$_} ? 'true' : 'false' } qw(truncated hangup launch_failed)), json_str($error));
  write_atomic("$dir/exit.json", $json) or die "cannot write $dir/exit.json: $!\n";
}

# The agent never ran: record why and stop.
sub fail_setup {
  my ($msg, %f) = @_;
  note($msg);
  unlink "$dir/launch";
  finish_pane_log(\%f) if $tty;
  log_close($_) for $stdout_log, $stderr_log;
  write_exit(exit_code => $EXIT_SETUP, launch_failed => 1, error => $msg, %f);
  pane_drain();
  exit $EXIT_SETUP;
}

# ---------------------------------------------------------------------------------------------
# Supervising the agent

sub supervise {
  ($dir) = @_;
  # Signals arrive through a self-pipe so that select() wakes for one that lands just before it.
  # One byte per signal kind until the loop has seen it: the pipe never fills.
  pipe(my $sig_r, my $sig_w) or die "pipe: $!\n";
  my %pending;
  for my $s (qw(HUP TERM INT QUIT CHLD)) {
    $SIG{$s} = sub { syswrite($sig_w, 'x') unless $pending{$s}++ };
  }
  $SIG{PIPE} = 'IGNORE';
  # Every file we create (logs, pid, exit.json) is the user's alone; the agent gets the umask back.
  my $umask = umask 077;

  my $spec = eval { read_settings("$dir/launch") };
  fail_setup('cannot start: ' . ($@ =~ s/\n\z//r || 'unreadable launch file')) unless $spec;
  $tty = $spec->{tty} ? 1 : 0;
  $token = $spec->{token} // '';
  $GRACE = $spec->{kill_grace_ms} / 1000 if ($spec->{kill_grace_ms} // '') =~ /\A[0-9]+\z/;
  $stderr_log = log_open($spec->{stderr_log}, $spec->{max_log_bytes});
  if ($tty) {
    # The pane logger writes this log; created here, it exists even if pipe-pane failed.
    open(my $fh, '>>', $spec->{stdout_log});
  } else {
    $stdout_log = log_open($spec->{stdout_log}, $spec->{max_log_bytes});
  }
  my @argv = @{ $spec->{arg} };
  my %env = map { /\A([^=]+)=(.*)\z/s ? ($1, $2) : () } @{ $spec->{env} };
  my ($pats, $pat_error) = compile_patterns($spec->{redact});
  @patterns = @$pats;
  # Fail closed: a log written without its redaction could leak the secrets it was meant to hide.
  fail_setup("cannot start: $pat_error; nothing was run") if $pat_error;
  fail_setup('cannot start: no command given') unless @argv;
  for my $log (grep { $_ && $_->{failed} } $stdout_log, $stderr_log) {
    fail_setup("cannot start: $log->{failed}");
  }
  # A hangup before the agent started (session killed right away): do not start it at all.
  fail_setup('the pane was closed before the agent started', hangup => 1) if $pending{HUP};

  # memory_mb: RLIMIT_AS, set by exec'ing the agent through `prlimit --as=N --` (same pid, argv
  # intact): perl-base has no setrlimit. It caps each process of the tree, not their sum (that
  # needs a cgroup controller, which containers and hosts without systemd do not reliably offer).
  my @prefix;
  if (my $mb = $spec->{memory_mb}) {
    my $prlimit = find_in_path('prlimit', '/usr/bin', '/bin', '/usr/sbin', '/sbin');
    @prefix = ($prlimit, '--as=' . ($mb << 20) . ':' . ($mb << 20), '--') if $prlimit;
    note("memory_mb=$mb is not enforced: prlimit(1) was not found") unless $prlimit;
  }
  if ($tty) { require POSIX }    # tcsetpgrp; tty agents (interactive CLIs) are rare and long

  # Two pipes coordinate the start: the child reports "ready" once it leads its own group, the
  # parent records the pid (so a kill() by termorch always finds a group) and says "go". The
  # status pipe is close-on-exec: EOF after "ready" means the exec worked.
  pipe(my $status_r, my $status_w) or fail_setup("pipe: $!");
  pipe(my $go_r, my $go_w) or fail_setup("pipe: $!");
  my ($out_r, $out_w, $err_r, $err_w);
  if (!$tty) {
    pipe($out_r, $out_w) or fail_setup("pipe: $!");
    pipe($err_r, $err_w) or fail_setup("pipe: $!");
  }
  my $subreaper = become_subreaper();
  my $pid = fork() // fail_setup("fork: $!");
  if ($pid == 0) {
    $SIG{$_} = 'DEFAULT' for qw(HUP TERM INT QUIT CHLD PIPE);
    close $status_r;
    close $go_w;
    if ($tty) {
      # The agent owns the terminal: its own group, made the foreground group (a background group
      # reading the tty would be stopped by SIGTTIN).
      setpgrp(0, 0);
      local $SIG{TTOU} = 'IGNORE';
      POSIX::tcsetpgrp(0, $$);
    } else {
      # Its own session: one kill(-pgid) reaches the whole tree, and without a controlling
      # terminal nothing can stop on a tty read or prompt the pane behind our back.
      new_session();
    }
    syswrite($status_w, 'R');
    sysread($go_r, my $go, 1) or exit_child($EXIT_SETUP);
    if (!$tty) {
      open(STDIN, '<', '/dev/null');    # perl keeps fds 0-2 (dup2 underneath)
      open(STDOUT, '>&', $out_w) or exit_child($EXIT_SETUP);
      open(STDERR, '>&', $err_w) or exit_child($EXIT_SETUP);
    }
    if (!chdir($spec->{cwd} // '.')) {
      syswrite($status_w, "cannot change to directory $spec->{cwd}: $!");
      exit_child($EXIT_CANNOT_EXEC);
    }
    %ENV = %env;
    umask $umask;
    # Through prlimit a missing command would be prlimit's failure, not known as a launch failure.
    if (@prefix && !resolve_command($argv[0])) { $! = 2 }    # ENOENT
    else { exec { $prefix[0] // $argv[0] } @prefix, @argv }
    my $missing = $! == 2;
    syswrite($status_w, "$argv[0]: $!");
    exit_child($missing ? $EXIT_NOT_FOUND : $EXIT_CANNOT_EXEC);
  }

  close $_ for grep { $_ } $status_w, $go_r, $out_w, $err_w;
  # EOF instead of "ready" means the child died at once; waitpid below tells how.
  1 until defined sysread($status_r, my $ready, 1);
  if ($tty) {
    setpgrp($pid, $pid);
    local $SIG{TTOU} = 'IGNORE';
    POSIX::tcsetpgrp(0, $pid);
  }
  # Before "go": the agent starts nothing outside its cgroup.
  my $record = $spec->{cgroup_record} // "$dir/cgroup";
  enter_cgroup($pid, $record, "termorch-$token")
    if $^O eq 'linux' && ($spec->{cgroup} // 1) && $token =~ /\A[0-9a-f]{1,64}\z/;
  write_atomic("$dir/pid", "$pid\n") or note("cannot write $dir/pid: $!");
  my $started_at = now_iso();
  syswrite($go_w, 'g');
  close $go_w;
  my $launch_error = '';
  while (1) {
    my $n = sysread($status_r, my $chunk, 4096);
    last if defined $n && $n == 0;
    $launch_error .= $chunk if $n;    # undef: EINTR
  }
  close $status_r;
  $launch_error = $launch_error eq '' ? undef : "cannot run the agent: $launch_error";
  note($launch_error) if $launch_error;

  # Read both pipes to EOF, showing and logging them; react to signals and deadlines.
  my $out = { fh => $out_r, log => $stdout_log, bytes => 0 };
  my $err = { fh => $err_r, log => $stderr_log, bytes => 0 };
  my %streams = $tty ? () : (fileno($out_r) => $out, fileno($err_r) => $err);
  my ($reaped, $status, $finished_at, $hangup) = (0, undef, undef, 0);
  my %deadline;    # term, kill, abandon => epoch seconds
  my $soon = sub { my ($name, $at) = @_; $deadline{$name} = $at if !$deadline{$name} || $deadline{$name} > $at };
  my $with_session = !$tty;
  until ($reaped && !%streams) {
    my $now = now();
    if ($deadline{term} && $now >= $deadline{term}) {
      delete $deadline{term};
      my $left = () = group_members($pid, $with_session);
      note("the agent left $left process(es) running; they were terminated") if $reaped && $left;
      signal_group('TERM', $pid, $with_session);
    }
    if ($deadline{kill} && $now >= $deadline{kill}) {
      delete $deadline{kill};
      signal_group('KILL', $pid, $with_session);
    }
    if ($deadline{abandon} && $now >= $deadline{abandon}) {
      # Something that escaped every group (and was not below us) still holds the pipes.
      note('output of processes that outlived the agent was not captured');
      %streams = ();
      last;
    }
    my ($rin, $win) = ('', '');
    vec($rin, $_, 1) = 1 for fileno($sig_r), keys %streams;
    vec($win, 1, 1) = 1 if $pane_ok && length $pane_queue;
    my $timeout = 1;    # a backstop: every real event wakes select
    $timeout = $_ - $now for grep { $_ - $now < $timeout } values %deadline;
    my $n = select(my $rout = $rin, my $wout = $win, undef, $timeout < 0 ? 0 : $timeout);
    next if $n < 0;    # EINTR: a signal, handled on the next turn
    sysread($sig_r, my $junk, 64) if vec($rout, fileno($sig_r), 1);
    for my $s (qw(HUP TERM INT QUIT)) {
      next unless delete $pending{$s};
      if ($s eq 'HUP') {
        # The session was killed (or the server died): pass it on like a shell would, then
        # escalate so that nothing outlives the pane for long. Only a hangup under a running
        # agent cut it short.
        $hangup = 1 unless $reaped;
        ($pane_ok, $pane_queue) = (0, '');
        $soon->(term => now() + $GRACE);
        $soon->(kill => now() + 2 * $GRACE);
      }
      $soon->(kill => now() + $GRACE) if $s eq 'TERM';
      # Ctrl-C in a tty=0 pane reaches only us (the agent has no terminal): forward it.
      signal_group($s, $pid, $with_session) unless $reaped && !group_members($pid, $with_session);
    }
    delete $pending{CHLD};
    # The agent, and orphans of its tree handed to us as its subreaper (left unreaped, they stay
    # zombies for as long as the agent runs). WNOHANG is 1 on Linux, macOS and the BSDs.
    while ((my $r = waitpid(-1, 1)) > 0) {
      next unless $r == $pid && !$reaped;
      ($reaped, $status, $finished_at) = (1, $?, now_iso());
      next unless %streams;
      # Its leftovers still hold the pipes: a moment to finish writing, then they are ended.
      my $term = now() + ($GRACE < $SETTLE ? $GRACE : $SETTLE);
      $soon->(term => $term);
      $soon->(kill => $term + $GRACE);
      $deadline{abandon} = $term + 2 * $GRACE;
    }
    next if $n <= 0;
    for my $fd (grep { vec($rout, $_, 1) } keys %streams) {
      my $st = $streams{$fd};
      my $got = sysread($st->{fh}, my $data, $READ_SIZE);
      if (!$got) {    # EOF (an error on a pipe we only read when it is ready is EOF too)
        close delete($streams{$fd})->{fh};
        next;
      }
      $st->{bytes} += $got;
      pane_put($data);
      log_feed($st->{log}, $data);
    }
    pane_flush_some() if vec($wout, 1, 1);
  }

  # Nothing of the agent may outlive its recorded end (termorch commits its worktree next).
  my $left = end_leftovers($pid, $with_session, $subreaper);
  note("the agent left $left process(es) running; they were terminated") if $left;
  if (!$reaped) {
    waitpid($pid, 0);
    ($status, $finished_at) = ($?, now_iso());
  }
  leave_cgroup($record);
  1 while waitpid(-1, 1) > 0;    # the leftovers ended were our children: no zombies behind us

  my %result = (pid => $pid, started_at => $started_at, finished_at => $finished_at, hangup => $hangup,
    stdout_bytes => $out->{bytes}, stderr_bytes => $err->{bytes});
  if ($launch_error) {
    @result{qw(exit_code launch_failed error)} = ($status >> 8, 1, $launch_error);
  } elsif ($status & 127) {
    $result{signal} = signal_name($status & 127);    # $? as perlvar documents it
  } else {
    $result{exit_code} = $status >> 8;
  }
  if ($tty) {
    local $SIG{TTOU} = 'IGNORE';
    POSIX::tcsetpgrp(0, getpgrp());
    finish_pane_log(\%result);
  }
  log_close($_) for $stdout_log, $stderr_log;
  $result{truncated} ||= grep { $_ && $_->{truncated} } $stdout_log, $stderr_log;
  write_exit(%result);
  pane_drain();
  # End the way the agent ended, so that the dead pane's #{pane_dead_status} and
  # #{pane_dead_signal} agree with exit.json. Core-dumping signals are not re-raised.
  if (($result{signal} // '') =~ /\ASIG(HUP|INT|TERM|KILL|PIPE|ALRM|USR1|USR2)\z/) {
    $SIG{$1} = 'DEFAULT';
    kill $1, $$;
  }
  exit($result{exit_code} // 128 + ($status & 127));
}

# In the forked child only: leave without perl's exit handlers (the parent's buffers and END).
sub exit_child {
  require POSIX;
  POSIX::_exit($_[0]);
}

main();
