#!/usr/bin/perl
# termorch's in-pane wrapper: runs one task attempt's agent inside its tmux pane.
#
#   perl wrapper.pl ATTEMPT_DIR            the pane's program (started by new-session)
#   perl wrapper.pl --filter ATTEMPT_DIR   tty mode's log filter (started by pipe-pane)
#
# Its contract with session.ts (files, signals, exit record) is described in docs/ARCHITECTURE.md.
#
# Files in ATTEMPT_DIR (written by session.ts), key=value lines, values %-encoded (%25 %0A %0D
# %00), each deleted as soon as it is read (it may hold secrets):
#   launch       version, cwd, stdout_log, stderr_log, tty (0|1), max_log_bytes (0 = no cap),
#                kill_grace_ms (TERM to KILL, whenever the wrapper must end something),
#                memory_mb (optional), cgroup (optional; 0: none), cgroup_record (optional:
#                the file recording the agent's cgroup, default ATTEMPT_DIR/cgroup), token;
#                arg= (the argv, in order), env= (NAME=VALUE: the agent's whole environment),
#                redact= (regexes); k_*= (OS constants, below)
#   filter       tty mode, for the --filter process: the same settings and redact= patterns
# Files it writes:
#   pid          the agent's pid, which is also its process group id (tmp + rename)
#   cgroup       the agent's cgroup path (Linux, where one could be made; or at cgroup_record),
#                removed with the cgroup
#   exit.json    how the attempt ended (tmp + rename); its appearance is the completion event
#   filter.done  tty mode: the filter's byte count, once it has logged everything (tmp + rename)
#
# Only perl-base modules: the wrapper must run on any machine that has tmux and perl. It loads
# none on its hot path: perl starts in ~1.5 ms, and POSIX alone adds ~8 ms, Time::HiRes ~3,
# Config ~2, Fcntl ~1.5 (CPU per task, on every task). termorch passes the OS constants in the
# launch file (k_*= lines, from Node on the same machine); what is missing there is taken from
# the modules, loaded only then.
# `use strict` without loading strict.pm (0.25 ms of CPU on every task): the same compile-time
# hints (strict refs 0x2, subs 0x200, vars 0x400). No `use warnings` either: it costs ~1.3 ms;
# tests compile this file with -w, and a copy with the real `use strict` in place of the bits.
BEGIN { $^H |= 0x602 }

# Seconds between TERM and KILL when something must end (the run's kill_grace_s, from the
# launch file; 5 until it is read).
my $GRACE = 5;

# F_GETFL/F_SETFL are 3/4 on Linux, macOS and the BSDs.
my ($F_GETFL, $F_SETFL) = (3, 4);
my %K;
my %K_FALLBACK = (
  o_wronly   => sub { require Fcntl; Fcntl::O_WRONLY() },
  o_creat    => sub { require Fcntl; Fcntl::O_CREAT() },
  o_append   => sub { require Fcntl; Fcntl::O_APPEND() },
  o_trunc    => sub { require Fcntl; Fcntl::O_TRUNC() },
  o_rdonly   => sub { require Fcntl; Fcntl::O_RDONLY() },
  o_nonblock => sub { require Fcntl; Fcntl::O_NONBLOCK() },
  e_intr     => sub { require Errno; Errno::EINTR() },
  e_again    => sub { require Errno; Errno::EAGAIN() },
  e_noent    => sub { require Errno; Errno::ENOENT() },
  wnohang    => sub { require POSIX; POSIX::WNOHANG() },
);
sub K {
  my ($name) = @_;
  $K{$name} = $K_FALLBACK{$name}->() unless defined $K{$name};
  return $K{$name};
}

# Takes the k_* lines of a launch/filter file. Syscall numbers are used only by a 64-bit perl
# (termorch sends them for x86-64 and arm64 Linux) and only after a sanity check.
my ($SYS_SETSID, $SYS_GETTIMEOFDAY, $SYS_PRCTL);
sub set_constants {
  my ($spec) = @_;
  for my $key (keys %$spec) {
    next unless $key =~ /\Ak_([a-z_]+)\z/;
    my $name = $1;
    $K{$name} = $spec->{$key} + 0 if $spec->{$key} =~ /\A[0-9]+\z/;
  }
  if (length(pack('L!', 0)) == 8) {
    $SYS_SETSID = delete $K{sys_setsid};
    $SYS_PRCTL = delete $K{sys_prctl};
    $SYS_GETTIMEOFDAY = delete $K{sys_gettimeofday};
    $SYS_GETTIMEOFDAY = undef if defined $SYS_GETTIMEOFDAY && abs(hires_time() - time()) > 2;
  }
}

sub hires_time {
  if (defined $SYS_GETTIMEOFDAY) {
    my $tv = "\0" x 16;
    if (syscall($SYS_GETTIMEOFDAY, $tv, 0) == 0) {
      my ($s, $us) = unpack('q q', $tv);
      return $s + $us / 1e6;
    }
    $SYS_GETTIMEOFDAY = undef;
  }
  require Time::HiRes;
  return Time::HiRes::time();
}

sub hires_sleep { select(undef, undef, undef, $_[0]) }

# The agent's own session (tty=0).
sub new_session {
  if (defined $SYS_SETSID) {
    my $sid = syscall($SYS_SETSID);
    return if $sid == $$ && getpgrp() == $$;
  }
  require POSIX;
  POSIX::setsid();
}

# In the forked child only: leave without running perl's exit handlers. Rare paths only.
sub child_exit {
  require POSIX;
  POSIX::_exit($_[0]);
}

my $REDACTED  = '[REDACTED]';
my $LINE_MAX  = 1 << 20;    # a partial line longer than this is redacted and written without its end
# Large reads from large pipes (below): a fast agent costs 16x fewer loop turns than at 64 KB.
my $READ_SIZE = 1 << 20;
my $PANE_MAX  = 1 << 20;    # bytes queued for a slow pane before further output is only logged
# Bytes per second shown in the pane at most (after a burst of $PANE_MAX). Nobody reads faster,
# and tmux spends a core on terminal emulation at ~40 MB/s, taken from the agent and from us:
# at 200 MB of output that alone doubled the time to log it.
my $PANE_RATE = 2 << 20;

# Exit codes for attempts whose agent never ran, after the shells' and env(1)'s conventions.
my $EXIT_NOT_FOUND = 127;
my $EXIT_CANNOT_EXEC = 126;
my $EXIT_SETUP = 125;

# ---------------------------------------------------------------------------------------------
# Small helpers

sub now_iso {
  my $t  = hires_time();
  my @g  = gmtime(int $t);
  my $ms = int(($t - int $t) * 1000);
  return sprintf('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', $g[5] + 1900, $g[4] + 1, $g[3], $g[2], $g[1], $g[0], $ms);
}

sub slurp {
  my ($path) = @_;
  open(my $fh, '<:raw', $path) or return undef;
  local $/;
  my $data = <$fh>;
  close $fh;
  return defined $data ? $data : '';
}

# Writes all of $data, retrying short writes and EINTR. Returns false on a real error.
sub write_all {
  my ($fh, $data) = @_;
  my $off = 0;
  my $len = length $data;
  while ($off < $len) {
    my $n = syswrite($fh, $data, $len - $off, $off);
    if (!defined $n) {
      next if $! == K('e_intr');
      return 0;
    }
    $off += $n;
  }
  return 1;
}

sub write_atomic {
  my ($path, $data) = @_;
  my $tmp = "$path.tmp.$$";
  sysopen(my $fh, $tmp, K('o_wronly') | K('o_creat') | K('o_trunc'), 0600) or return 0;
  my $ok = write_all($fh, $data);
  close($fh) or $ok = 0;
  if (!$ok || !rename($tmp, $path)) {
    unlink $tmp;
    return 0;
  }
  return 1;
}

# Reads and deletes a launch/filter file: key => value, except arg, env and redact, which are
# lists in file order.
sub read_launch {
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
  set_constants(\%spec);
  return \%spec;
}

# Compiles the redaction patterns. Returns (compiled regexes, error message or undef).
sub load_patterns {
  my ($sources) = @_;
  my @res;
  my $n = 0;
  for my $src (@$sources) {
    $n++;
    next if $src eq '';
    # Interpolated patterns cannot run code: (?{ }) needs `use re 'eval'`, which is not on.
    my $re = eval { qr/$src/ };
    if (!$re) {
      my $why = $@;
      $why =~ s/ at \S+ line \d+.*//s;
      return (\@res, "redaction pattern $n does not compile: $why");
    }
    # The prefilter runs the pattern over a whole chunk of lines with /m, so that ^ and $ still
    # see line boundaries. Wherever it matches a line alone it also matches inside the chunk,
    # except with string anchors, negative lookaround (the neighbouring "\n" can veto it),
    # dotall or backtracking verbs: such patterns skip the prefilter.
    my $pre = $src =~ /\\[AzZG]|\(\?<?!|\(\?\^?[a-z]*s|\(\*/ ? undef : eval { qr/$src/m };
    push @res, { re => $re, pre => $pre };
  }
  return (\@res, undef);
}

# Redacts each line on its own (the line break is never part of a match), so the result is
# the same however the stream was cut into reads. Patterns apply in order, each to the output
# of the previous one. A chunk that a pattern's prefilter does not match at all is not split:
# secrets are rare, and a per-line loop over every pattern costs ~30x the plain copy.
sub redact {
  my ($patterns, $text) = @_;
  for my $p (@$patterns) {
    next if $p->{pre} && $text !~ $p->{pre};
    my $re = $p->{re};
    my @lines = split /(?<=\n)/, $text;
    for my $line (@lines) {
      my $nl = $line =~ s/\n\z// ? "\n" : '';
      # An empty match would scatter markers through the line without hiding anything.
      $line =~ s/$re/length($&) ? $REDACTED : ''/ge;
      $line .= $nl;
    }
    $text = join '', @lines;
  }
  return $text;
}

# ---------------------------------------------------------------------------------------------
# Capped log files

sub log_open {
  my ($path, $max) = @_;
  my $log = { path => $path, max => $max, written => 0, truncated => 0, failed => undef };
  # Append, so a log someone else already started (an earlier attempt, termorch's own
  # launch message) is never destroyed; the cap covers the file as a whole.
  if (sysopen(my $fh, $path, K('o_wronly') | K('o_creat') | K('o_append'), 0600)) {
    $log->{fh} = $fh;
    $log->{written} = -s $fh || 0;
  } else {
    $log->{failed} = "cannot open $path: $!";
  }
  return $log;
}

sub log_write {
  my ($log, $data) = @_;
  return if !$log->{fh} || $log->{truncated} || $data eq '';
  my $ok;
  if ($log->{max} <= 0 || $log->{written} + length($data) <= $log->{max}) {
    $ok = write_all($log->{fh}, $data);
    $log->{written} += length $data;
  } else {
    my $room = $log->{max} - $log->{written};
    $ok = $room <= 0 || write_all($log->{fh}, substr($data, 0, $room));
    $ok &&= write_all($log->{fh}, "\n[termorch: log truncated at $log->{max} bytes]\n");
    $log->{written} = $log->{max};
    $log->{truncated} = 1;
  }
  if (!$ok) {
    $log->{failed} = "writing $log->{path} failed: $!";
    close $log->{fh};
    delete $log->{fh};
  }
}

sub log_close {
  my ($log) = @_;
  close $log->{fh} if $log->{fh};
  delete $log->{fh};
}

# A line-buffered, redacting feed into one log. Returns a closure pair (feed, finish).
sub line_feeder {
  my ($log, $patterns) = @_;
  my $buf = '';
  my $in_key = 0;
  my $out = sub {
    my ($text) = @_;
    $text = redact_key_blocks($text, \$in_key)
      if @$patterns && ($in_key || index($text, 'PRIVATE KEY-----') >= 0);
    log_write($log, redact($patterns, $text));
  };
  my $feed = sub {
    $buf .= $_[0];
    my $cut = rindex($buf, "\n") + 1;
    $cut = length($buf) if length($buf) - $cut > $LINE_MAX;
    $out->(substr($buf, 0, $cut, '')) if $cut > 0;
  };
  my $finish = sub {
    $out->($buf) if $buf ne '';
    $buf = '';
  };
  return ($feed, $finish);
}

# ---------------------------------------------------------------------------------------------
# JSON (hand-written: JSON::PP is not part of perl-base)

sub json_str {
  my ($s) = @_;
  return 'null' unless defined $s;
  my $copy = $s;
  # Bytes that are not UTF-8 cannot be carried by JSON text; they become U+FFFD.
  if (!utf8::decode($copy)) {
    $copy = $s;
    $copy =~ s/[\x80-\xff]/\x{fffd}/g;
  }
  $copy =~ s/(["\\])/\\$1/g;
  $copy =~ s/([\x00-\x1f\x7f])/sprintf('\\u%04x', ord $1)/ge;
  $copy =~ s/([^\x00-\x7f])/json_u(ord $1)/ge;
  return qq("$copy");
}

# Values: undef (null), bool(x), str(x), or an integer.
sub json_val {
  my ($v) = @_;
  return 'null' unless defined $v;
  return $$v ? 'true' : 'false' if ref $v eq 'SCALAR';
  return json_str($v->[0]) if ref $v eq 'ARRAY';
  return $v if $v =~ /\A-?(?:0|[1-9][0-9]*)\z/;
  die "not a JSON integer: $v\n";
}

sub json_object {
  my @pairs = @_;
  my @out;
  while (my ($k, $v) = splice(@pairs, 0, 2)) {
    push @out, json_str($k) . ':' . json_val($v);
  }
  return '{' . join(',', @out) . "}\n";
}

sub bool { return \($_[0] ? 1 : 0) }
sub str { return defined $_[0] ? [$_[0]] : undef }

# ---------------------------------------------------------------------------------------------
# The agent's process group

# Live (non-zombie) processes of the agent: those whose process group, or session, is $id;
# those that descend from us; and those in its cgroup. The session matters for tty=0, where the
# agent leads its own session: a job-control shell inside it may have moved children to groups
# of their own. Descent catches what left the session (setsid): as the agent's subreaper we
# inherit whatever of its tree loses its parent, so all of it stays below us. Zombies are
# excluded because nothing may ever reap them (a container's init often does not).
sub group_members {
  my ($id, $with_session) = @_;
  my %found;
  if (opendir(my $dh, '/proc')) {
    my %children;
    while (defined(my $e = readdir $dh)) {
      next unless $e =~ /\A[0-9]+\z/ && $e != $$;
      open(my $fh, '<', "/proc/$e/stat") or next;
      my $stat = <$fh>;
      close $fh;
      next unless defined $stat && $stat =~ /\A\d+ \(.*\) (\S) (-?\d+) (-?\d+) (-?\d+)/s;
      next if $1 eq 'Z' || $1 eq 'X';
      push @{ $children{$2} }, $e;
      $found{$e} = 1 if $3 == $id || ($with_session && $4 == $id);
    }
    closedir $dh;
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
  return kill(0, -$id) ? (-$id) : ();
}

# Linux, cgroup v2: where we may create one (root, or a delegated subtree of our own), the
# agent gets a cgroup of its own, and whatever it starts stays in it, whatever its session or
# parent; clean finds it through its record (cgroup_record=, default ATTEMPT_DIR/cgroup) even if
# we were killed. Off with cgroup=0. Anything that fails leaves the agent where it is.
my $cgroup;

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
  close $mi;
  return unless defined $mount && open(my $cg, '<', '/proc/self/cgroup');
  my ($path) = map { /\A0::(\/.*)\n?\z/ ? $1 : () } <$cg>;
  close $cg;
  return unless defined $path && $path !~ / \(deleted\)\z/;
  $path = '' if $path eq '/';
  my $target = "$mount$path/$name";
  mkdir($target) or return;
  my $ok = 0;
  if (sysopen(my $fh, "$target/cgroup.procs", K('o_wronly'))) {
    $ok = defined syswrite($fh, "$pid\n");
    close $fh;
  }
  if (!$ok || !write_atomic($record, "$target\n")) {
    rmdir $target;
    return;
  }
  $cgroup = $target;
}

sub cgroup_procs {
  return () unless defined $cgroup && open(my $fh, '<', "$cgroup/cgroup.procs");
  my @pids = grep { $_ != $$ } map { /\A(\d+)/ ? $1 : () } <$fh>;
  close $fh;
  return @pids;
}

# Removes the agent's cgroup once it is empty (KILLing what is left there, atomically against
# forks where cgroup.kill exists), and its record.
sub leave_cgroup {
  my ($record) = @_;
  return unless defined $cgroup;
  for my $step (1 .. 100) {
    last if rmdir $cgroup;
    if (open(my $fh, '>', "$cgroup/cgroup.kill")) { print $fh "1\n"; close $fh }
    kill 'KILL', cgroup_procs();
    hires_sleep(0.01);
  }
  unlink $record unless -d $cgroup;
  $cgroup = undef;
}

# Linux: PR_SET_CHILD_SUBREAPER. Whatever of the agent's tree outlives its parent is then
# re-parented to us instead of init: every member of its group or session descends from the
# agent, so once the agent is gone an empty list of our children proves that none is left,
# without reading the stat file of every process on the machine (~0.3 ms at 70 processes).
my $subreaper = 0;

sub become_subreaper {
  $subreaper = defined $SYS_PRCTL && syscall($SYS_PRCTL, 36, 1, 0, 0, 0) == 0 ? 1 : 0;
}

sub have_children {
  open(my $fh, '<', "/proc/$$/task/$$/children") or return 1;
  my $list = <$fh>;
  close $fh;
  return defined $list && $list =~ /[0-9]/;
}

# Ends whatever is left of the agent's group (end_leftovers). Returns how many were left.
sub reap_leftovers {
  my ($id, $with_session) = @_;
  return 0 if $subreaper && !have_children();
  my @left = group_members($id, $with_session);
  return @left ? end_leftovers($id, $with_session, scalar @left) : 0;
}

# ---------------------------------------------------------------------------------------------
# Filter mode: pipe-pane feeds it the pane's output (tty=1); it writes the redacted, capped
# stdout log. The main wrapper prints an OSC sequence carrying this attempt's token once the
# agent is gone; the filter logs everything before it, reports, and exits. Unknown OSC
# sequences are swallowed by tmux, so the operator does not see the marker.

# ---------------------------------------------------------------------------------------------
# Main mode

my $dir;
my ($stdout_log, $stderr_log);
my @patterns;
my $tty = 0;
my $token;
my $pane_queue = '';
my $pane_ok = 1;
my $pane_dropped = 0;
my $pane_tokens = $PANE_MAX;
my $pane_clock;

# Bytes for the pane. tty=0: queued and written without blocking (tmux renders ~40 MB/s; the
# agent must not be slowed down to that, and the log is the record anyway). tty=1: the agent
# shares the terminal, so its file status flags stay untouched and we write directly.
sub pane_put {
  my ($data, $always) = @_;
  return unless $pane_ok;
  if ($tty) {
    $pane_ok = 0 unless write_all(\*STDERR, $data);
    return;
  }
  my $now = hires_time();
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
  my $n = syswrite(STDOUT, $pane_queue);
  if (defined $n) {
    substr($pane_queue, 0, $n, '');
  } elsif ($! != K('e_again') && $! != K('e_intr')) {
    # EIO: the pane is gone (session killed). Keep logging, stop showing.
    $pane_ok = 0;
    $pane_queue = '';
  }
  if ($pane_queue eq '' && $pane_dropped) {
    $pane_queue = "\r\n[termorch: $pane_dropped bytes not shown here; the log has them all]\r\n";
    $pane_dropped = 0;
  }
}

# Flushes the pane queue, waiting for the pane at most $secs seconds.
sub pane_drain {
  my ($secs) = @_;
  my $end = hires_time() + $secs;
  while ($pane_ok && length $pane_queue) {
    my $left = $end - hires_time();
    last if $left <= 0;
    my $win = '';
    vec($win, 1, 1) = 1;
    select(undef, $win, undef, $left);
    pane_flush_some();
  }
}

sub write_exit {
  my (%f) = @_;
  my $json = json_object(
    exit_code     => $f{exit_code},
    signal        => str($f{signal}),
    started_at    => str($f{started_at}),
    finished_at   => str($f{finished_at} || now_iso()),
    pid           => $f{pid},
    stdout_bytes  => $f{stdout_bytes} || 0,
    stderr_bytes  => $f{stderr_bytes} || 0,
    truncated     => bool($f{truncated}),
    hangup        => bool($f{hangup}),
    launch_failed => bool($f{launch_failed}),
    error         => str(defined $f{error} ? redact(\@patterns, $f{error}) : undef),
  );
  write_atomic("$dir/exit.json", $json) or die "cannot write $dir/exit.json: $!\n";
}

sub main {
  if (@ARGV == 1 && $ARGV[0] eq '--check') {
    load_rare();
    exit 0;
  }
  if (@ARGV == 2 && $ARGV[0] eq '--filter') {
    filter_main($ARGV[1]);
  }
  die "usage: wrapper.pl ATTEMPT_DIR | wrapper.pl --filter ATTEMPT_DIR\n" unless @ARGV == 1;
  $dir = $ARGV[0];

  # Signals arrive through a self-pipe so that select() wakes up for them even when one lands
  # just before the call.
  pipe(my $sig_r, my $sig_w) or die "pipe: $!\n";
  my %pending;
  for my $s (qw(HUP TERM INT QUIT CHLD)) {
    $SIG{$s} = sub { $pending{$s} = 1; syswrite($sig_w, 'x') };
  }
  $SIG{PIPE} = 'IGNORE';

  my $spec = eval { read_launch("$dir/launch") };
  if (!$spec) {
    my $err = $@ || 'unreadable launch file';
    chomp $err;
    fail_setup("cannot start: $err");
  }
  # Non-blocking only now that the constants are known (a few bytes never fill a pipe meanwhile).
  for my $fh ($sig_r, $sig_w) {
    fcntl($fh, $F_SETFL, fcntl($fh, $F_GETFL, 0) | K('o_nonblock'));
  }
  $tty = $spec->{tty} ? 1 : 0;
  $token = $spec->{token};
  $GRACE = $spec->{kill_grace_ms} / 1000 if ($spec->{kill_grace_ms} // '') =~ /\A[0-9]+\z/;
  my $max = $spec->{max_log_bytes} || 0;
  $stderr_log = log_open($spec->{stderr_log}, $max);
  if ($tty) {
    # The filter writes this log; creating it here means it exists even if pipe-pane failed.
    # tcsetpgrp has no stand-in: tty agents (interactive CLIs, rare and long) pay for POSIX.
    require POSIX;
    if (sysopen(my $fh, $spec->{stdout_log}, K('o_wronly') | K('o_creat') | K('o_append'), 0600)) { close $fh }
  } else {
    $stdout_log = log_open($spec->{stdout_log}, $max);
    fcntl(STDOUT, $F_SETFL, fcntl(STDOUT, $F_GETFL, 0) | K('o_nonblock'));
  }
  my @argv = @{ $spec->{arg} };
  my %env;
  for my $entry (@{ $spec->{env} }) {
    $env{$1} = $2 if $entry =~ /\A([^=]+)=(.*)\z/s;
  }
  my ($pats, $pat_error) = load_patterns($spec->{redact});
  @patterns = @$pats;
  # Fail closed: a log written without its redaction could leak the secrets it was meant to hide.
  fail_setup("cannot start: $pat_error; nothing was run") if $pat_error;
  fail_setup("cannot start: no command given") unless @argv;
  for my $log (grep { $_ } ($stdout_log, $stderr_log)) {
    fail_setup("cannot start: $log->{failed}") if $log->{failed};
  }
  my $cwd = defined $spec->{cwd} ? $spec->{cwd} : '.';

  # A hangup before the agent started (session killed right away): do not start it at all.
  if ($pending{HUP}) {
    fail_setup('the pane was closed before the agent started', hangup => 1);
  }

  my $prlimit;
  my $mem_mb = $spec->{memory_mb} || 0;
  if ($mem_mb > 0) {
    # RLIMIT_AS, set by exec'ing the agent through `prlimit --as=N --` (same pid, argv intact):
    # perl-base has no setrlimit, and hard-coding syscall numbers per architecture is worse.
    # It caps each process of the tree, not their sum (that needs a cgroup, which containers
    # and hosts without systemd do not reliably offer). Node/V8 agents start fine under it
    # (checked at 1 GB).
    $prlimit = find_in_path('prlimit', '/usr/bin', '/bin', '/usr/sbin', '/sbin');
    note("memory_mb=$mem_mb is not enforced: prlimit(1) was not found") unless $prlimit;
    load_rare();    # the child calls resolve_command
  }

  # Two pipes coordinate the start: the child reports "ready" once it leads its own group, the
  # parent records the pid (so kill() always finds a group to signal), then says "go". The
  # status pipe is close-on-exec: EOF after "ready" means exec succeeded.
  pipe(my $status_r, my $status_w) or fail_setup("pipe: $!");
  pipe(my $go_r, my $go_w) or fail_setup("pipe: $!");
  my ($out_r, $out_w, $err_r, $err_w);
  if (!$tty) {
    pipe($out_r, $out_w) or fail_setup("pipe: $!");
    pipe($err_r, $err_w) or fail_setup("pipe: $!");
    # F_SETPIPE_SZ (Linux): 1 MB pipes let the agent run ahead while a chunk is redacted.
    # Best effort: a smaller limit (fs.pipe-max-size) only costs speed.
    if ($^O eq 'linux') { fcntl($_, 1031, 1 << 20) for ($out_w, $err_w) }
  }
  become_subreaper();
  my $pid = fork();
  fail_setup("fork: $!") unless defined $pid;
  if ($pid == 0) {
    $SIG{$_} = 'DEFAULT' for qw(HUP TERM INT QUIT CHLD PIPE);
    close $status_r;
    close $go_w;
    if ($tty) {
      # The agent owns the terminal: its own group, made the foreground group (a background
      # group reading the tty would be stopped by SIGTTIN).
      setpgrp(0, 0);
      local $SIG{TTOU} = 'IGNORE';
      POSIX::tcsetpgrp(0, $$);
    } else {
      # Its own session: one kill(-pgid) reaches the whole tree, and without a controlling
      # terminal nothing can stop on a tty read or prompt the pane behind our back.
      new_session();
    }
    syswrite($status_w, 'R');
    my $n = sysread($go_r, my $go, 1);
    child_exit($EXIT_SETUP) unless $n;
    if (!$tty) {
      # Perl keeps fds 0-2 when the standard handles are reopened (dup2 underneath).
      open(STDIN, '<', '/dev/null');
      open(STDOUT, '>&', $out_w) or child_exit($EXIT_SETUP);
      open(STDERR, '>&', $err_w) or child_exit($EXIT_SETUP);
    }
    if (!chdir $cwd) {
      syswrite($status_w, 'C' . ($! + 0) . " $!");
      child_exit($EXIT_CANNOT_EXEC);
    }
    %ENV = %env;
    if ($prlimit && !resolve_command($argv[0])) {
      # prlimit would report this itself, but then it would not be known as a launch failure.
      $! = K('e_noent');
    } elsif ($prlimit) {
      my $bytes = $mem_mb * 1024 * 1024;
      exec { $prlimit } 'prlimit', "--as=$bytes:$bytes", '--', @argv;
    } else {
      exec { $argv[0] } @argv;
    }
    my $errno = $! + 0;
    syswrite($status_w, "E$errno $!");
    child_exit($errno == K('e_noent') ? $EXIT_NOT_FOUND : $EXIT_CANNOT_EXEC);
  }

  close $status_w;
  close $go_r;
  close $out_w if $out_w;
  close $err_w if $err_w;
  # EOF instead of "ready" means the child died at once; waitpid below tells how.
  while (1) {
    last if defined sysread($status_r, my $ready, 1) || $! != K('e_intr');
  }
  if ($tty) {
    setpgrp($pid, $pid);
    local $SIG{TTOU} = 'IGNORE';
    POSIX::tcsetpgrp(0, $pid);
  }
  # Before "go": the agent starts nothing outside its cgroup.
  my $cgroup_record = defined $spec->{cgroup_record} ? $spec->{cgroup_record} : "$dir/cgroup";
  enter_cgroup($pid, $cgroup_record, "termorch-$token")
    if $^O eq 'linux' && ($spec->{cgroup} // 1) && defined $token && $token =~ /\A[0-9a-f]{1,64}\z/;
  write_atomic("$dir/pid", "$pid\n") or note("cannot write $dir/pid: $!");
  my $started_at = now_iso();
  syswrite($go_w, 'g');
  close $go_w;
  my $status_msg = '';
  while (1) {
    my $n = sysread($status_r, my $chunk, 4096);
    if (!defined $n) { next if $! == K('e_intr'); last }
    last if $n == 0;
    $status_msg .= $chunk;
  }
  close $status_r;
  my $launch_error;
  if ($status_msg =~ /\A([CE])(\d+) (.*)\z/s) {
    my ($stage, $errno, $text) = ($1, $2, $3);
    $launch_error = $stage eq 'C'
      ? "cannot run the agent: cannot change to directory $cwd: $text"
      : "cannot run the agent: $argv[0]: $text";
    note($launch_error);
  }

  # Drain both pipes to EOF while showing and logging them; react to signals.
  my %streams;
  my ($out_feed, $out_finish, $err_feed, $err_finish);
  if (!$tty) {
    ($out_feed, $out_finish) = line_feeder($stdout_log, \@patterns);
    ($err_feed, $err_finish) = line_feeder($stderr_log, \@patterns);
    $streams{fileno $out_r} = { fh => $out_r, feed => $out_feed, finish => $out_finish, name => 'out' };
    $streams{fileno $err_r} = { fh => $err_r, feed => $err_feed, finish => $err_finish, name => 'err' };
  }
  my %bytes = (out => 0, err => 0);
  my ($reaped, $wait_status, $finished_at, $hangup) = (0, undef, undef, 0);
  my %deadline;    # name => epoch seconds
  my $with_session = !$tty;
  while (1) {
    last if $reaped && !%streams;
    my $now = hires_time();
    if (defined $deadline{term} && $now >= $deadline{term}) {
      delete $deadline{term};
      my @left = group_members($pid, $with_session);
      note('the agent left ' . scalar(@left) . ' process(es) running; they were terminated') if $reaped && @left;
      signal_group('TERM', $pid, $with_session);
    }
    if (defined $deadline{kill} && $now >= $deadline{kill}) {
      delete $deadline{kill};
      signal_group('KILL', $pid, $with_session);
    }
    if (defined $deadline{abandon} && $now >= $deadline{abandon}) {
      # Something outside the group (it called setsid) still holds the pipes: stop waiting.
      note('output of processes that outlived the agent was not captured');
      $_->{finish}->() for values %streams;
      %streams = ();
      last;
    }
    my ($rin, $win) = ('', '');
    vec($rin, fileno($sig_r), 1) = 1;
    vec($rin, $_, 1) = 1 for keys %streams;
    vec($win, 1, 1) = 1 if $pane_ok && length $pane_queue;
    my $timeout = 1;    # a backstop only: every real event wakes select
    for my $d (values %deadline) {
      $timeout = $d - $now if $d - $now < $timeout;
    }
    $timeout = 0 if $timeout < 0;
    my $n = select(my $rout = $rin, my $wout = $win, undef, $timeout);
    if ($n < 0) {
      next if $! == K('e_intr');
      die "select: $!\n";
    }
    if ($n > 0 && vec($rout, fileno($sig_r), 1)) {
      1 while sysread($sig_r, my $junk, 256);
    }
    for my $s (qw(HUP TERM INT QUIT)) {
      next unless delete $pending{$s};
      # Hangup: the session was killed (or the server died). Pass it on like a shell would,
      # then escalate so nothing outlives the pane for long.
      if ($s eq 'HUP') {
        # Only a hangup under a running agent cut it short; after its end it changes nothing.
        $hangup = 1 unless $reaped;
        $pane_ok = 0;
        $pane_queue = '';
        $deadline{term} ||= hires_time() + $GRACE;
        $deadline{kill} ||= hires_time() + 2 * $GRACE;
      }
      $deadline{kill} ||= hires_time() + $GRACE if $s eq 'TERM';
      # Ctrl-C in a tty=0 pane reaches only us (the agent has no terminal): forward it.
      signal_group($s, $pid, $with_session) unless $reaped && !group_members($pid, $with_session);
    }
    delete $pending{CHLD};
    # The agent, and orphans of its tree handed to us as its subreaper (left unreaped, they
    # would stay zombies for as long as the agent runs).
    while ((my $r = waitpid(-1, K('wnohang'))) > 0) {
      if ($r == $pid && !$reaped) {
        ($reaped, $wait_status, $finished_at) = (1, $?, now_iso());
        if (%streams) {
          # Its leftovers still hold the pipes: give them a moment, then end them.
          my $t = hires_time();
          my $term = $t + ($GRACE < 1 ? $GRACE : 1);
          $deadline{term} = $term if !defined $deadline{term} || $deadline{term} > $term;
          $deadline{kill} = $term + $GRACE if !defined $deadline{kill} || $deadline{kill} > $term + $GRACE;
          $deadline{abandon} = $term + $GRACE + 1;
        }
      }
    }
    next if $n <= 0;
    for my $fd (keys %streams) {
      next unless vec($rout, $fd, 1);
      my $st = $streams{$fd};
      my $r = sysread($st->{fh}, my $data, $READ_SIZE);
      if (!defined $r) {
        next if $! == K('e_intr') || $! == K('e_again');
        $r = 0;
      }
      if ($r == 0) {
        $st->{finish}->();
        close $st->{fh};
        delete $streams{$fd};
        next;
      }
      $bytes{ $st->{name} } += $r;
      pane_put($data);
      $st->{feed}->($data);
    }
    pane_flush_some() if $wout && vec($wout, 1, 1);
  }

  # Nothing of the agent may outlive its recorded end (termorch commits its worktree next).
  my $left = reap_leftovers($pid, $with_session);
  note("the agent left $left process(es) running; they were terminated") if $left;
  if (!$reaped) {
    waitpid($pid, 0);
    ($wait_status, $finished_at) = ($?, now_iso());
  }
  leave_cgroup($cgroup_record);
  # The leftovers we ended were our children (we are the subreaper): no zombies behind us.
  1 while waitpid(-1, K('wnohang')) > 0;

  my %result = (
    pid          => $pid,
    started_at   => $started_at,
    finished_at  => $finished_at,
    hangup       => $hangup,
    stdout_bytes => $bytes{out},
    stderr_bytes => $bytes{err},
  );
  if (defined $launch_error) {
    @result{qw(exit_code launch_failed error)} = ($wait_status >> 8, 1, $launch_error);
  } elsif (($wait_status & 127) != 0) {
    # The wait status as perlvar documents $?: low 7 bits the signal, high byte the exit code.
    $result{signal} = signal_name($wait_status & 127);
  } else {
    $result{exit_code} = ($wait_status >> 8) & 255;
  }

  if ($tty) {
    local $SIG{TTOU} = 'IGNORE';
    POSIX::tcsetpgrp(0, getpgrp());
  }
  finish_pane_log(\%result) if $tty;
  log_close($_) for grep { $_ } ($stdout_log, $stderr_log);
  $result{truncated} ||= ($stdout_log && $stdout_log->{truncated}) || $stderr_log->{truncated};
  write_exit(%result);
  pane_drain(2);
  # End the way the agent ended, so the dead pane's #{pane_dead_status} / #{pane_dead_signal}
  # agree with exit.json (a cross-check: docs/ARCHITECTURE.md). Core-dumping signals are not re-raised.
  if (defined $result{signal} && $result{signal} =~ /\ASIG(HUP|INT|TERM|KILL|PIPE|ALRM|USR1|USR2)\z/) {
    $SIG{$1} = 'DEFAULT';
    kill $1, $$;
  }
  exit(defined $result{exit_code} ? $result{exit_code} : 128 + ($wait_status & 127));
}

# ---------------------------------------------------------------------------------------------
# The rare paths (tty agents, failures, leftovers, signals, private keys, non-ASCII errors) sit
# after __DATA__ and are compiled on first use: perl compiles ~2.5 us of CPU per line, and most
# attempts never take them. Compiled here, the code sees the file's lexicals like any other sub.

my $rare_loaded = 0;
# DATA reads the file perl already opened (the same version, even if it was replaced since). A
# forked child shares its offset, so the child must never be the one to load it: main loads the
# paths the child can need before it forks.
my $rare_at = tell(DATA);

sub load_rare {
  return if $rare_loaded;
  $rare_loaded = 1;
  seek(DATA, $rare_at, 0) or die "wrapper: cannot read its rare paths: $!\n";
  my $source = do { local $/; <DATA> };
  eval "#line 1 wrapper.pl(rare)\n$source\n1" or die "wrapper: cannot compile its rare paths: $@";
}

our $AUTOLOAD;

sub AUTOLOAD {
  (my $name = $AUTOLOAD) =~ s/.*:://;
  return if $name eq 'DESTROY';
  load_rare();
  my $code = __PACKAGE__->can($name) or die "wrapper: no sub $name\n";
  goto &$code;
}

main();

__DATA__
# A private key printed whole spans lines, which per-line patterns cannot see: while
# redaction is on, every line from a BEGIN ... PRIVATE KEY----- marker to its END marker is
# replaced. $in_key carries the state from one chunk to the next.
my $KEY_BEGIN = qr/-----BEGIN [A-Z ]*PRIVATE KEY-----/;
my $KEY_END   = qr/-----END [A-Z ]*PRIVATE KEY-----/;

sub redact_key_blocks {
  my ($text, $in_key) = @_;
  my @lines = split /(?<=\n)/, $text;
  for my $line (@lines) {
    my $nl = $line =~ s/\n\z// ? "\n" : '';
    if ($$in_key) {
      $$in_key = 0 if $line =~ s/\A.*?$KEY_END/$REDACTED/;
      $line = $REDACTED if $$in_key;
    } elsif ($line =~ $KEY_BEGIN && $line !~ /$KEY_BEGIN.*?$KEY_END/) {
      $line =~ s/$KEY_BEGIN.*/$REDACTED/;
      $$in_key = 1;
    }
    $line .= $nl;
  }
  return join '', @lines;
}

sub json_u {
  my ($cp) = @_;
  return sprintf('\\u%04x', $cp) if $cp < 0x10000;
  $cp -= 0x10000;
  return sprintf('\\u%04x\\u%04x', 0xd800 + ($cp >> 10), 0xdc00 + ($cp & 0x3ff));
}

sub signal_name {
  my ($n) = @_;
  # Only for an agent ended by a signal: Config is not worth loading on every task.
  require Config;

  my @names = split ' ', do { no strict 'refs'; ${'Config::Config'}{sig_name} };
  my $name = $names[$n];
  return defined $name ? "SIG$name" : "SIG$n";
}

sub signal_group {
  my ($sig, $id, $with_session) = @_;
  kill $sig, -$id;
  kill $sig, $_ for group_members($id, $with_session);
  if ($sig eq 'KILL' && defined $cgroup && open(my $fh, '>', "$cgroup/cgroup.kill")) {
    print $fh "1\n";
    close $fh;
  }
}

# Whether execvp would find $name with the current PATH (execvp's default when unset).
sub resolve_command {
  my ($name) = @_;
  return -e $name if index($name, '/') >= 0;
  my $path = defined $ENV{PATH} ? $ENV{PATH} : '/bin:/usr/bin';
  for my $d (split /:/, $path, -1) {
    my $candidate = ($d eq '' ? '.' : $d) . "/$name";
    return 1 if -f $candidate && -x _;
  }
  return 0;
}

sub find_in_path {
  my ($name, @extra) = @_;
  for my $d ((split /:/, $ENV{PATH} || ''), @extra) {
    next if $d eq '';
    return "$d/$name" if -f "$d/$name" && -x _;
  }
  return undef;
}

sub filter_main {
  my ($dir) = @_;
  # tmux closes our stdin when the pane goes; a hangup must not cut the final flush short.
  $SIG{HUP} = 'IGNORE';
  $SIG{PIPE} = 'IGNORE';
  my $spec = read_launch("$dir/filter");
  my ($patterns) = load_patterns($spec->{redact});
  my $log = log_open($spec->{stdout_log}, $spec->{max_log_bytes} || 0);
  my $marker = "\e]7777;termorch-end:$spec->{token}\a";
  my ($line_feed, $finish) = line_feeder($log, $patterns);
  # The terminal's line discipline turns every "\n" into "\r\n": the transcript keeps plain
  # newlines, like the tty=0 logs. A "\r" alone (a progress line redrawn in place) is kept:
  # as "\n" every redraw would become a line of its own, and `cat` still shows the final
  # state. "\r\r\n" (a program in raw mode writing "\r\n" itself) is a newline too. A "\r"
  # ending a chunk waits for the next one, which may start with its "\n".
  my $cr = '';
  my $feed = sub {
    my $text = $cr . $_[0];
    $cr = $text =~ s/(\r+)\z// ? $1 : '';
    $text =~ s/\r+\n/\n/g;
    $line_feed->($text);
  };
  my $bytes = 0;
  my $pending = '';
  while (1) {
    my $n = sysread(STDIN, my $data, $READ_SIZE);
    if (!defined $n) {
      next if $! == K('e_intr');
      last;
    }
    last if $n == 0;
    $pending .= $data;
    my $at = index($pending, $marker);
    if ($at >= 0) {
      $bytes += $at;
      $feed->(substr($pending, 0, $at));
      last;
    }
    # Keep back only a tail that could be the start of a marker split across reads (usually
    # nothing: the marker starts with ESC ]), so the log keeps up with the pane.
    my $keep = 0;
    for (my $k = length($marker) - 1 < length($pending) ? length($marker) - 1 : length($pending); $k > 0; $k--) {
      if (substr($pending, -$k) eq substr($marker, 0, $k)) { $keep = $k; last }
    }
    next if length($pending) <= $keep;
    my $chunk = substr($pending, 0, length($pending) - $keep, '');
    $bytes += length $chunk;
    $feed->($chunk);
  }
  if (index($pending, $marker) < 0) {
    $bytes += length $pending;
    $feed->($pending);
  }
  $line_feed->($cr);
  $finish->();
  log_close($log);
  my $report = "bytes=$bytes\ntruncated=" . ($log->{truncated} ? 1 : 0) . "\n";
  if ($log->{failed}) {
    (my $e = $log->{failed}) =~ s/\n/ /g;
    $report .= "error=$e\n";
  }
  write_atomic("$dir/filter.done", $report);
  exit 0;
}

# termorch's own messages: the pane and the stderr log.
sub note {
  my ($msg) = @_;
  my $line = "termorch: $msg\n";
  log_write($stderr_log, redact(\@patterns, $line)) if $stderr_log;
  (my $shown = $line) =~ s/\n/\r\n/g;
  pane_put($shown, 1);
}

# tty mode: lets the filter log everything the pane got, then takes its count into $result.
# Bounded: pipe-pane may have failed to start, and after a hangup the filter ends on EOF.
sub finish_pane_log {
  my ($result) = @_;
  write_all(\*STDOUT, "\e]7777;termorch-end:$token\a") if $pane_ok && defined $token;
  my $done;
  for (1 .. 500) {
    last if defined($done = slurp("$dir/filter.done"));
    hires_sleep(0.01);
  }
  unlink "$dir/filter";
  if (!defined $done) {
    note('the pane output logger did not finish; the stdout log may be incomplete');
    return;
  }
  $result->{stdout_bytes} = $1 if $done =~ /^bytes=(\d+)$/m;
  $result->{truncated} = 1 if $done =~ /^truncated=1$/m;
  note("the pane output logger failed: $1") if $done =~ /^error=(.*)$/m;
}

# The agent never ran: record why and stop.
sub fail_setup {
  my ($msg, %f) = @_;
  note($msg);
  unlink "$dir/launch";
  finish_pane_log(\%f) if $tty;
  log_close($_) for grep { $_ } ($stdout_log, $stderr_log);
  write_exit(exit_code => $EXIT_SETUP, launch_failed => 1, error => $msg, %f);
  pane_drain(2);
  exit $EXIT_SETUP;
}

# TERM, then KILL after the grace period, to what is left of the agent's group. Returns $count.
sub end_leftovers {
  my ($id, $with_session, $count) = @_;
  signal_group('TERM', $id, $with_session);
  my $kill_at = hires_time() + $GRACE;
  my $killed = 0;
  # After the KILL, a second at most for the kernel to take them away.
  while (hires_time() < $kill_at + 1) {
    return $count unless group_members($id, $with_session);
    hires_sleep(0.02);
    if (!$killed && hires_time() >= $kill_at) {
      signal_group('KILL', $id, $with_session);
      $killed = 1;
    }
  }
  return $count;
}
