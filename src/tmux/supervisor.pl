#!/usr/bin/perl
# termorch's pane supervisor: runs one attempt's agent in its tmux pane and does what must outlive
# termorch there. Its contract with src/tmux/session.ts (files, signals, exit record) is in
# docs/ARCHITECTURE.md, "The supervisor in the pane"; its redaction and capping rules are
# src/redact/RULES.md, which the TypeScript engine follows as well.
#
#   perl supervisor.pl ATTEMPT_DIR   the pane's program (started by new-session)
#
# tty mode's pane logger (pane-logger.pl) and the redaction corpus's test `require` this file
# for its log engine: then it only defines its subs.
#
# perl-base only, and every module costs CPU on every task (perl starts in ~1.5 ms; POSIX adds
# ~8, Time::HiRes, Fcntl and Errno ~1 each, warnings 1.6): the path every task takes loads only
# strict. Modules for rarer paths are required there: POSIX for tty agents, Fcntl once there is
# output, Config to name a signal. A test compiles this file with `perl -w`.
use strict;

my $REDACTED = '[REDACTED]';
my $LINE_MAX = 1 << 20;     # a partial line longer than this is redacted and written as it is
my $READ_SIZE = 1 << 20;    # with 1 MB pipes: a fast agent costs fewer loop turns
my $PANE_MAX = 1 << 20;     # bytes queued for the pane; beyond that output is only logged
# Bytes per second shown in the pane at most, after a burst of $PANE_MAX. tmux spends a core on
# terminal emulation at ~40 MB/s, taken from the agent (200 MB: 0.19 s to log instead of 0.33).
my $PANE_RATE = 2 << 20;
# How long leftovers that still hold the output pipes after the agent's end may go on writing
# (a background `(sleep 0.3; echo late) &`) before they are ended; at most the grace.
my $SETTLE = 1;
# Exit codes of attempts whose agent never ran, after the shells' and env(1)'s conventions.
my ($EXIT_NOT_FOUND, $EXIT_CANNOT_EXEC, $EXIT_SETUP) = (127, 126, 125);

my $GRACE = 5;    # seconds from TERM to KILL, and bound of every wait: kill_grace_ms once read
my ($dir, $tty, $token, $stdout_log, $stderr_log, @patterns, $cgroup) = ('', 0, '');
my ($pane_queue, $pane_ok, $pane_dropped, $pane_tokens, $pane_clock, $pane_nonblocking) = ('', 1, 0, $PANE_MAX);
my ($KEY_BEGIN, $KEY_END) = (qr/-----BEGIN [A-Z ]*PRIVATE KEY-----/, qr/-----END [A-Z ]*PRIVATE KEY-----/);

# perl has no built-in for prctl, setsid or a clock finer than a second, and the modules that do
# cost CPU on every task (above; util-linux setsid(1) costs ~0.8 ms and hides the exec's errno):
# their syscall numbers for the 64-bit Linux ABIs termorch runs on, told apart by the ELF header
# of this perl. Elsewhere the modules are loaded, and there is no subreaper.
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

if (!caller) {
  die "usage: supervisor.pl ATTEMPT_DIR\n" unless @ARGV == 1;
  supervise($ARGV[0]);
}

# ---------------------------------------------------------------------------------------------
# Supervising one agent

sub supervise {
  ($dir) = @_;
  # Signals come through a self-pipe, so that select() wakes for one that lands just before it;
  # one byte per kind until the loop has seen it, so the pipe never fills.
  pipe(my $sig_r, my $sig_w) or die "pipe: $!\n";
  my %pending;
  for my $s (qw(HUP TERM INT QUIT CHLD)) { $SIG{$s} = sub { syswrite($sig_w, 'x') unless $pending{$s}++ } }
  $SIG{PIPE} = 'IGNORE';
  my $umask = umask 077;    # our files (logs, pid, exit.json) are the user's alone

  my $spec = eval { read_settings("$dir/launch") };
  fail_setup('cannot start: ' . ($@ =~ s/\n\z//r || 'unreadable launch file')) unless $spec;
  ($tty, $token) = ($spec->{tty} ? 1 : 0, $spec->{token} // '');
  $GRACE = $spec->{kill_grace_ms} / 1000 if ($spec->{kill_grace_ms} // '') =~ /\A[0-9]+\z/;
  $stderr_log = log_open($spec->{stderr_log}, $spec->{max_log_bytes});
  # tty: the pane logger writes the stdout log; created here, it exists even if pipe-pane failed.
  if ($tty) { open(my $fh, '>>', $spec->{stdout_log}) }
  else { $stdout_log = log_open($spec->{stdout_log}, $spec->{max_log_bytes}) }
  my $pat_error = use_patterns($spec->{redact});
  # Fail closed: a log written without its redaction could leak the secrets it was meant to hide.
  fail_setup("cannot start: $pat_error; nothing was run") if $pat_error;
  fail_setup('cannot start: no command given') unless @{ $spec->{arg} };
  fail_setup("cannot start: $_->{failed}") for grep { $_ && $_->{failed} } $stdout_log, $stderr_log;
  # A hangup before the agent started (the session was killed at once): it never starts.
  fail_setup('the pane was closed before the agent started', hangup => 1) if $pending{HUP};
  require POSIX if $tty;    # tcsetpgrp; tty agents (interactive CLIs) are rare and long

  my $subreaper = $syscalls && syscall($syscalls->{prctl}, 36, 1, 0, 0, 0) == 0;    # below
  my ($pid, $out_r, $err_r, $launch_error) = start_agent($spec, $umask);
  my $started_at = now_iso();

  # Read both pipes to EOF, showing and logging them; react to signals and deadlines.
  my $out = { fh => $out_r, log => $stdout_log, bytes => 0 };
  my $err = { fh => $err_r, log => $stderr_log, bytes => 0 };
  my %streams = $tty ? () : (fileno($out_r) => $out, fileno($err_r) => $err);
  my ($reaped, $status, $finished_at, $hangup) = (0, undef, undef, 0);
  my %deadline;    # term, kill, abandon => epoch seconds
  my $by = sub { $deadline{ $_[0] } = $_[1] if !$deadline{ $_[0] } || $deadline{ $_[0] } > $_[1] };
  # The process the attempt belongs to (a worker): once it has been gone owner_after_ms, nobody
  # will end the agent but us. Looked at once a second at most (the loop's backstop wakes it).
  my ($owner, $owner_gone, $owner_seen) = ($spec->{owner_pid} // '', undef, 0);
  my $owner_after = ($spec->{owner_after_ms} // '') =~ /\A[0-9]+\z/ ? $spec->{owner_after_ms} / 1000 : undef;
  $owner = '' unless $owner =~ /\A[1-9][0-9]*\z/ && defined $owner_after;
  until ($reaped && !%streams) {
    my $now = now();
    if ($owner ne '' && !$reaped && $now - $owner_seen >= 1) {
      $owner_seen = $now;
      if (kill(0, $owner) || $!{EPERM}) { $owner_gone = undef }
      elsif (!defined $owner_gone) { $owner_gone = $now }
      if (defined $owner_gone && $now - $owner_gone >= $owner_after) {
        note("its worker (pid $owner) has been gone ${owner_after}s: the agent was ended, another worker runs the task");
        $owner = '';
        $by->(term => $now);
        $by->(kill => $now + $GRACE);
      }
    }
    if ($deadline{term} && $now >= $deadline{term}) {
      delete $deadline{term};
      my $left = () = members($pid);
      note("the agent left $left process(es) running; they were terminated") if $reaped && $left;
      signal_members('TERM', $pid);
    }
    if ($deadline{kill} && $now >= $deadline{kill}) {
      delete $deadline{kill};
      signal_members('KILL', $pid);
    }
    if ($deadline{abandon} && $now >= $deadline{abandon}) {
      # Something that escaped every group, and was not below us, still holds the pipes.
      note('output of processes that outlived the agent was not captured');
      last;
    }
    my ($rin, $win, $timeout) = ('', '', 1);    # the timeout is a backstop: events wake select
    vec($rin, $_, 1) = 1 for fileno($sig_r), keys %streams;
    vec($win, 1, 1) = 1 if $pane_ok && length $pane_queue;
    $timeout = $_ - $now for grep { $_ - $now < $timeout } values %deadline;
    my $n = select(my $rout = $rin, my $wout = $win, undef, $timeout < 0 ? 0 : $timeout);
    next if $n < 0;    # EINTR: the signal is seen on the next turn
    sysread($sig_r, my $junk, 64) if vec($rout, fileno($sig_r), 1);
    for my $s (grep { delete $pending{$_} } qw(HUP TERM INT QUIT)) {
      if ($s eq 'HUP') {
        # The session was killed (or the server died): pass it on like a shell would, then make
        # sure nothing outlives the pane for long. Only a hangup under a running agent cut it short.
        $hangup ||= !$reaped;
        $pane_ok = 0;
        $by->(term => now() + $GRACE);
        $by->(kill => now() + 2 * $GRACE);
      }
      $by->(kill => now() + $GRACE) if $s eq 'TERM';
      # Ctrl-C in a tty=0 pane reaches only us (the agent has no terminal): forward it.
      signal_members($s, $pid) unless $reaped && !members($pid);
    }
    delete $pending{CHLD};
    # The agent, and orphans of its tree handed to us as their subreaper (unreaped, they would
    # stay zombies while the agent runs). WNOHANG is 1 on Linux, macOS and the BSDs.
    while ((my $r = waitpid(-1, 1)) > 0) {
      next unless $r == $pid;
      ($reaped, $status, $finished_at) = (1, $?, now_iso());
      next unless %streams;
      # Its leftovers hold the pipes: a moment to finish writing, then they are ended.
      my $term = now() + ($GRACE < $SETTLE ? $GRACE : $SETTLE);
      $by->(term => $term);
      $by->(kill => $term + $GRACE);
      $deadline{abandon} = $term + 2 * $GRACE;
    }
    for my $fd (grep { $n > 0 && vec($rout, $_, 1) } keys %streams) {
      my $st = $streams{$fd};
      # A pipe is read only once select says it is ready: an error is as final as EOF.
      my $got = sysread($st->{fh}, my $data, $READ_SIZE);
      if (!$got) {
        close delete($streams{$fd})->{fh};
        next;
      }
      grow_pipes(map { $_->{fh} } values %streams) unless $out->{bytes} + $err->{bytes};
      $st->{bytes} += length $data;
      pane_put($data);
      log_feed($st->{log}, $data);
    }
    pane_flush() if $n > 0 && vec($wout, 1, 1);
  }

  # Nothing of the agent may outlive its recorded end (termorch commits its worktree next). As
  # the subreaper, no child of ours left proves that nothing is left, without a /proc scan.
  my $left = $subreaper && !have_children() ? 0 : end_members($pid);
  note("the agent left $left process(es) running; they were terminated") if $left;
  if (!$reaped) {
    waitpid($pid, 0);
    ($status, $finished_at) = ($?, now_iso());
  }
  leave_cgroup($spec);
  1 while waitpid(-1, 1) > 0;    # the leftovers were our children: no zombies behind us

  my %result = (pid => $pid, started_at => $started_at, finished_at => $finished_at, hangup => $hangup,
    stdout_bytes => $out->{bytes}, stderr_bytes => $err->{bytes});
  if ($launch_error) { @result{qw(exit_code launch_failed error)} = ($status >> 8, 1, $launch_error) }
  elsif ($status & 127) { $result{signal} = signal_name($status & 127) }    # $? as perlvar has it
  else { $result{exit_code} = $status >> 8 }
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

# Forks the agent. Two pipes coordinate the start: the child reports "ready" once it leads its own
# group; the parent puts it in its cgroup, records the pid (so that termorch's kill() always finds
# a group) and says "go". The status pipe is close-on-exec: EOF after "ready" means the exec
# worked; otherwise the child writes why. Returns (pid, stdout pipe, stderr pipe, launch error).
sub start_agent {
  my ($spec, $umask) = @_;
  my @argv = @{ $spec->{arg} };
  # memory_mb: RLIMIT_AS through `prlimit --as=N --` (same pid, argv intact): perl-base has no
  # setrlimit. It caps each process of the tree, not their sum (that needs a cgroup controller,
  # which containers and hosts without systemd do not reliably offer).
  my @prefix;
  if (my $mb = $spec->{memory_mb}) {
    my ($prlimit) = grep { -f && -x _ } map { "$_/prlimit" } split(/:/, $ENV{PATH} // ''), qw(/usr/bin /bin /usr/sbin /sbin);
    @prefix = ($prlimit, '--as=' . ($mb << 20) . ':' . ($mb << 20), '--') if $prlimit;
    note("memory_mb=$mb is not enforced: prlimit(1) was not found") unless $prlimit;
  }
  # wrap=: the command line the agent runs in (its sandbox), after the limit so that both apply.
  push @prefix, @{ $spec->{wrap} };
  pipe(my $status_r, my $status_w) && pipe(my $go_r, my $go_w) or fail_setup("pipe: $!");
  my ($out_r, $out_w, $err_r, $err_w);
  $tty || (pipe($out_r, $out_w) && pipe($err_r, $err_w)) or fail_setup("pipe: $!");
  my $pid = fork() // fail_setup("fork: $!");
  if ($pid == 0) {
    $SIG{$_} = 'DEFAULT' for qw(HUP TERM INT QUIT CHLD PIPE);
    if ($tty) {
      # The agent owns the terminal: its own group, the foreground one (a background group
      # reading the tty would be stopped by SIGTTIN).
      setpgrp(0, 0);
      local $SIG{TTOU} = 'IGNORE';
      POSIX::tcsetpgrp(0, $$);
    } elsif (!$syscalls || syscall($syscalls->{setsid}) != $$) {
      # tty=0: a session of its own. One kill(-pgid) reaches the whole tree, and without a
      # controlling terminal nothing can stop on a tty read or prompt the pane behind our back.
      require POSIX;
      POSIX::setsid();
    }
    syswrite($status_w, 'R');
    sysread($go_r, my $go, 1) or exit_child($EXIT_SETUP);
    if (!$tty) {
      # Standard input: the prompt, for agents that read it there (`stdin=`), else nothing. perl
      # keeps fds 0-2 when it reopens them (dup2 underneath).
      if (!open(STDIN, '<', $spec->{stdin} // '/dev/null')) {
        syswrite($status_w, "cannot open $spec->{stdin} as the agent's standard input: $!");
        exit_child($EXIT_CANNOT_EXEC);
      }
      open(STDOUT, '>&', $out_w) && open(STDERR, '>&', $err_w) or exit_child($EXIT_SETUP);
    }
    if (!chdir($spec->{cwd} // '.')) {
      syswrite($status_w, "cannot change to directory $spec->{cwd}: $!");
      exit_child($EXIT_CANNOT_EXEC);
    }
    %ENV = map { /\A([^=]+)=(.*)\z/s ? ($1, $2) : () } @{ $spec->{env} };
    umask $umask;
    # Through prlimit or a sandbox, a missing command would be their failure, not a launch failure.
    if (@prefix && !resolve_command($argv[0])) { $! = 2 }    # ENOENT
    else { exec { $prefix[0] // $argv[0] } @prefix, @argv }
    my $missing = $! == 2;
    syswrite($status_w, "$argv[0]: $!");
    exit_child($missing ? $EXIT_NOT_FOUND : $EXIT_CANNOT_EXEC);
  }
  close $_ for grep { $_ } $status_w, $go_r, $out_w, $err_w;
  # EOF instead of "ready": the child died at once, and waitpid tells how.
  1 until defined sysread($status_r, my $ready, 1);
  if ($tty) {
    setpgrp($pid, $pid);
    local $SIG{TTOU} = 'IGNORE';
    POSIX::tcsetpgrp(0, $pid);
  }
  enter_cgroup($pid, $spec) if $^O eq 'linux' && ($spec->{cgroup} // 1) && $token =~ /\A[0-9a-f]{1,64}\z/;
  write_atomic("$dir/pid", "$pid\n") or note("cannot write $dir/pid: $!");
  syswrite($go_w, 'g');
  close $go_w;
  my $error = '';
  while (1) {
    my $n = sysread($status_r, my $chunk, 4096);
    last if defined $n && $n == 0;
    $error .= $chunk if $n;    # undef: EINTR
  }
  note("cannot run the agent: $error") if $error ne '';
  return ($pid, $out_r, $err_r, $error eq '' ? undef : "cannot run the agent: $error");
}

# In the forked child only: leave without perl's exit handlers (the parent's buffers and END).
sub exit_child {
  require POSIX;
  POSIX::_exit($_[0]);
}

# Whether execvp would find $name with the agent's PATH (execvp's default when unset).
sub resolve_command {
  my ($name) = @_;
  return -e $name if index($name, '/') >= 0;
  return grep { -f "$_/$name" && -x _ } map { $_ eq '' ? '.' : $_ } split /:/, $ENV{PATH} // '/bin:/usr/bin', -1;
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
# The agent's processes

# Live (not zombie) processes of the agent: its process group; its session (tty=0: a job-control
# shell in it may have moved children to groups of their own); every process below us (as the
# subreaper we inherit what left the session); its cgroup. Zombies are left out: nothing may ever
# reap them (a container's init often does not).
sub members {
  my ($id) = @_;
  opendir(my $dh, '/proc') or return kill(0, -$id) ? (-$id) : ();
  my (%children, %found);
  for my $p (grep { /\A[0-9]+\z/ && $_ != $$ } readdir $dh) {
    my $stat = slurp("/proc/$p/stat") // next;
    next unless $stat =~ /\A\d+ \(.*\) ([^ZX]) (-?\d+) (-?\d+) (-?\d+)/s;
    push @{ $children{$2} }, $p;
    $found{$p} = 1 if $3 == $id || (!$tty && $4 == $id);
  }
  my @below = ($$);
  while (defined(my $p = pop @below)) {
    push @below, @{ $children{$p} || [] };
    $found{$_} = 1 for @{ $children{$p} || [] };
  }
  $found{$_} = 1 for cgroup_procs();
  return keys %found;
}

sub signal_members {
  my ($sig, $id) = @_;
  kill $sig, -$id;
  kill $sig, members($id);
  if ($sig eq 'KILL' && $cgroup && open(my $fh, '>', "$cgroup/cgroup.kill")) { print $fh "1\n" }
}

# TERM to what is left of the agent, KILL after the grace, then at most a grace more for the
# kernel to take it away. Returns how many processes were left.
sub end_members {
  my ($id) = @_;
  my $left = () = members($id);
  return 0 unless $left;
  signal_members('TERM', $id);
  my ($kill_at, $killed) = (now() + $GRACE, 0);
  while (members($id) && now() < $kill_at + $GRACE) {
    select(undef, undef, undef, 0.02);
    next if $killed || now() < $kill_at;
    signal_members('KILL', $id);
    $killed = 1;
  }
  return $left;
}

sub have_children {
  my $list = slurp("/proc/$$/task/$$/children");
  return !defined $list || $list =~ /[0-9]/;
}

# Linux, cgroup v2: where we may create one (root, or a delegated subtree of our own), the agent
# gets a cgroup of its own, and whatever it starts stays in it whatever its session or parent;
# `termorch clean` finds it through its record (cgroup_record=, default ATTEMPT_DIR/cgroup) even
# if we were killed. Anything that fails leaves the agent where it is.
sub enter_cgroup {
  my ($pid, $spec) = @_;
  my ($mount) = map { /\A\S+ \S+ \S+ \/ (\S+) .* - cgroup2 / ? $1 : () } split /\n/, slurp('/proc/self/mountinfo') // '';
  my ($path) = (slurp('/proc/self/cgroup') // '') =~ /^0::(\/.*)$/m;
  # Only a mount of the hierarchy's root: our path in /proc/self/cgroup is relative to it.
  return unless defined $mount && defined $path && $path !~ / \(deleted\)\z/;
  my $target = ($mount =~ s/\\([0-7]{3})/chr(oct $1)/ger) . ($path eq '/' ? '' : $path) . "/termorch-$token";
  mkdir($target) or return;
  my $ok = open(my $fh, '>', "$target/cgroup.procs");
  $ok &&= syswrite($fh, "$pid\n");
  return $cgroup = $target if $ok && write_atomic($spec->{cgroup_record} // "$dir/cgroup", "$target\n");
  rmdir $target;
}

sub cgroup_procs {
  return () unless $cgroup && defined(my $procs = slurp("$cgroup/cgroup.procs"));
  return grep { $_ != $$ } $procs =~ /^(\d+)/mg;
}

# Removes the agent's cgroup once it is empty (KILLing what is left in it, atomically against
# forks where cgroup.kill exists), then its record.
sub leave_cgroup {
  my ($spec) = @_;
  return unless $cgroup;
  my $end = now() + $GRACE;
  until (rmdir($cgroup) || now() > $end) {
    if (open(my $fh, '>', "$cgroup/cgroup.kill")) { print $fh "1\n" }
    kill 'KILL', cgroup_procs();
    select(undef, undef, undef, 0.01);
  }
  unlink $spec->{cgroup_record} // "$dir/cgroup" unless -d $cgroup;
  $cgroup = undef;
}

sub signal_name {
  require Config;    # only for an agent ended by a signal
  my $name = (split ' ', do { no strict 'refs'; ${'Config::Config'}{sig_name} })[ $_[0] ];
  return 'SIG' . ($name // $_[0]);
}

# ---------------------------------------------------------------------------------------------
# Redaction and capped logs: the rules are src/redact/RULES.md.

# Compiles the patterns every log then applies. Returns an error message, or undef.
sub use_patterns {
  my ($sources) = @_;
  @patterns = ();
  for my $i (0 .. $#$sources) {
    my $src = $sources->[$i];
    next if $src eq '';
    # Interpolated patterns cannot run code: (?{ }) needs `use re 'eval'`, which is off.
    my $re = eval { qr/$src/ };
    return 'redaction pattern ' . ($i + 1) . ' does not compile: ' . ($@ =~ s/ at \S+ line \d+.*//sr) unless $re;
    # A speed-up only: one search of a chunk of lines with /m (^ and $ still see line ends) tells
    # whether the pattern can match any of them. Most chunks hold no secret, and the loop over
    # every line costs ~30x the copy. What matches a line alone also matches within the chunk,
    # except with string anchors, negative lookaround, dotall or verbs: those always loop.
    my $pre = $src =~ /\\[AzZG]|\(\?<?!|\(\?\^?[a-z]*s|\(\*/ ? undef : eval { qr/$src/m };
    push @patterns, { re => $re, pre => $pre };
  }
  return undef;
}

# Redacts whole lines (a partial line flushed at $LINE_MAX counts as one). $in_key carries a
# stream's private-key block state from one call to the next.
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
      } elsif ($line =~ $KEY_BEGIN && $line !~ /$KEY_BEGIN.*?$KEY_END/) {
        $line =~ s/$KEY_BEGIN.*/$REDACTED/;
        $$in_key = 1;
      }
      $line .= $nl;
    }
    $text = join '', @lines;
  }
  for my $p (@patterns) {
    next if $p->{pre} && $text !~ $p->{pre};
    my @lines = split /(?<=\n)/, $text;
    for my $line (@lines) {
      my $nl = $line =~ s/\n\z// ? "\n" : '';
      $line =~ s/$p->{re}/length($&) ? $REDACTED : ''/ge;    # an empty match hides nothing
      $line .= $nl;
    }
    $text = join '', @lines;
  }
  return $text;
}

# A log file, appended to (what an earlier writer left stays) and capped counting what it held.
sub log_open {
  my ($path, $max) = @_;
  my $log = { path => $path, max => $max || 0, written => 0, truncated => 0, pending => '', in_key => 0 };
  if (open(my $fh, '>>:raw', $path)) { @$log{qw(fh written)} = ($fh, -s $fh || 0) }
  else { $log->{failed} = "cannot open $path: $!" }
  return $log;
}

# Writes redacted bytes up to the cap; past it, what fits and then the marker, once.
sub log_write {
  my ($log, $data) = @_;
  return if !$log->{fh} || $log->{truncated} || $data eq '';
  my $room = $log->{max} > 0 ? $log->{max} - $log->{written} : length $data;
  if (length($data) > $room) {
    $data = substr($data, 0, $room > 0 ? $room : 0) . "\n[termorch: log truncated at $log->{max} bytes]\n";
    $log->{truncated} = 1;
  }
  $log->{written} += length $data;
  return if write_all($log->{fh}, $data);
  $log->{failed} = "writing $log->{path} failed: $!";
  close delete $log->{fh};
}

# The agent's output: whole lines are redacted and written; a partial line waits for its end
# unless it grows past $LINE_MAX.
sub log_feed {
  my ($log, $data) = @_;
  $log->{pending} .= $data;
  my $cut = rindex($log->{pending}, "\n") + 1;
  $cut = length $log->{pending} if length($log->{pending}) - $cut > $LINE_MAX;
  log_write($log, redact_lines(substr($log->{pending}, 0, $cut, ''), \$log->{in_key})) if $cut;
}

sub log_close {
  my ($log) = @_;
  return unless $log;
  log_write($log, redact_lines($log->{pending}, \$log->{in_key})) if $log->{pending} ne '';
  $log->{pending} = '';
  close delete $log->{fh} if $log->{fh};
}

# ---------------------------------------------------------------------------------------------
# The pane

# Once the agent prints (many tasks never do, and Fcntl costs ~1 ms): Linux, 1 MB pipes, so that
# the agent runs ahead while a chunk is redacted (200 MB with the built-in patterns: 385 ms
# instead of 456). Best effort: fs.pipe-max-size may be lower.
sub grow_pipes {
  require Fcntl;
  my $setpipe = eval { Fcntl::F_SETPIPE_SZ() } // return;
  fcntl($_, $setpipe, 1 << 20) for @_;
}

# Bytes for the pane. tty=0: queued and written when the pane can take them, never blocking the
# agent; a slow pane loses what it cannot take, with one note (the log has everything). tty=1:
# the agent shares the terminal, its flags stay untouched, and we write directly.
sub pane_put {
  my ($data, $always) = @_;
  return unless $pane_ok;
  return $pane_ok = write_all(\*STDERR, $data) if $tty;
  my $now = now();
  $pane_tokens += ($now - $pane_clock) * $PANE_RATE if defined $pane_clock;
  $pane_tokens = $PANE_MAX if $pane_tokens > $PANE_MAX;
  $pane_clock = $now;
  if (length($pane_queue) + length($data) > $PANE_MAX || (!$always && length($data) > $pane_tokens)) {
    $pane_dropped += length $data;
  } else {
    $pane_tokens -= length $data;
    $pane_queue .= $data;
  }
}

sub pane_flush {
  return unless $pane_ok && length $pane_queue;
  if (!$pane_nonblocking++) {
    require Fcntl;
    fcntl(STDOUT, Fcntl::F_SETFL(), fcntl(STDOUT, Fcntl::F_GETFL(), 0) | Fcntl::O_NONBLOCK());
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
  while ($pane_ok && length $pane_queue && now() < $end) {
    my $win = '';
    vec($win, 1, 1) = 1;
    select(undef, $win, undef, $end - now());
    pane_flush();
  }
}

# termorch's own messages: the pane and the stderr log.
sub note {
  my ($msg) = @_;
  log_write($stderr_log, redact_lines("termorch: $msg\n", \my $in_key)) if $stderr_log;
  pane_put("termorch: $msg\r\n", 1);
}

# tty mode: lets the pane logger log everything the pane got (the marker), then takes its count.
# Bounded by the grace: pipe-pane may have failed to start.
sub finish_pane_log {
  my ($result) = @_;
  write_all(\*STDOUT, "\e]7777;termorch-end:$token\a") if $pane_ok;
  my ($end, $done) = (now() + $GRACE);
  select(undef, undef, undef, 0.01) until defined($done = slurp("$dir/filter.done")) || now() > $end;
  unlink "$dir/filter";
  return note('the pane output logger did not finish; the stdout log may be incomplete') unless defined $done;
  $result->{stdout_bytes} = $1 if $done =~ /^bytes=(\d+)$/m;
  $result->{truncated} = 1 if $done =~ /^truncated=1$/m;
  note("the pane output logger failed: $1") if $done =~ /^error=(.*)$/m;
}

# ---------------------------------------------------------------------------------------------
# Files and the exit record

# Reads and deletes a launch/filter file (it holds secrets): key => value, except arg, env, redact
# and wrap, which are lists in file order. Values are %-encoded.
sub read_settings {
  my ($path) = @_;
  my $raw = slurp($path) // die "cannot read $path: $!\n";
  unlink $path;
  my %spec = (arg => [], env => [], redact => [], wrap => []);
  for (split /\n/, $raw) {
    my ($key, $value) = /\A([a-z_]+)=(.*)\z/s or next;
    $value =~ s/%([0-9A-Fa-f]{2})/chr(hex $1)/ge;
    if (ref $spec{$key}) { push @{ $spec{$key} }, $value }
    else { $spec{$key} = $value }
  }
  return \%spec;
}

sub slurp {
  open(my $fh, '<:raw', $_[0]) or return undef;
  local $/;
  return <$fh> // '';
}

# Writes all of $data, through short writes. False on an error.
sub write_all {
  my ($fh, $data) = @_;
  for (my $off = 0; $off < length $data;) {
    $off += syswrite($fh, $data, length($data) - $off, $off) // return 0;
  }
  return 1;
}

# tmp + rename: a reader sees the whole file or nothing.
sub write_atomic {
  my ($path, $data) = @_;
  open(my $fh, '>:raw', "$path.tmp.$$") or return 0;
  my $ok = write_all($fh, $data);
  return 1 if close($fh) && $ok && rename("$path.tmp.$$", $path);
  unlink "$path.tmp.$$";
  return 0;
}

# Seconds since the epoch, to the microsecond.
sub now {
  my $tv = pack('q q', 0, 0);
  if ($syscalls && syscall($syscalls->{gettimeofday}, $tv, 0) == 0) {
    my ($s, $us) = unpack('q q', $tv);
    return $s + $us / 1e6;
  }
  require Time::HiRes;
  return Time::HiRes::time();
}

sub now_iso {
  my $t = now();
  my @g = gmtime $t;
  return sprintf('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', $g[5] + 1900, $g[4] + 1, @g[3, 2, 1, 0], ($t - int $t) * 1000);
}

# exit.json, the keys and types session.ts's ExitFile schema reads (docs/ARCHITECTURE.md).
sub write_exit {
  my (%f) = @_;
  my $json = sprintf(
    '{"exit_code":%s,"signal":%s,"started_at":%s,"finished_at":%s,"pid":%s,"stdout_bytes":%d,'
      . '"stderr_bytes":%d,"truncated":%s,"hangup":%s,"launch_failed":%s,"error":%s}' . "\n",
    $f{exit_code} // 'null', json_str($f{signal}), json_str($f{started_at}), json_str($f{finished_at} // now_iso()),
    $f{pid} // 'null', $f{stdout_bytes} || 0, $f{stderr_bytes} || 0,
    (map { $f{$_} ? 'true' : 'false' } qw(truncated hangup launch_failed)),
    json_str(defined $f{error} ? redact_lines($f{error}, \my $in_key) : undef));
  write_atomic("$dir/exit.json", $json) or die "cannot write $dir/exit.json: $!\n";
}

sub json_str {
  my ($s) = @_;
  return 'null' unless defined $s;
  utf8::decode($s) or $s =~ s/[\x80-\xff]/\x{fffd}/g;    # JSON text is UTF-8
  $s =~ s/(["\\])/\\$1/g;
  $s =~ s/([\x00-\x1f])/sprintf('\\u%04x', ord $1)/ge;
  utf8::encode($s);
  return qq("$s");
}

1;
