# SPDX-License-Identifier: MIT
# fish completion for rlock(1). Installed into share/fish/vendor_completions.d.

# Lock names held on the server the command line points at; quietly nothing when the
# server is unreachable or slow (more than a second).
function __rlock_locks
    set -l tokens (commandline -opc)
    set -l server
    set -l i 2
    while test $i -le (count $tokens)
        set -l w $tokens[$i]
        switch $w
            case --
                break
            case -u --url --prefix --config --user --password-file --cacert --cacertdir --cert --tls-key --sni --sentinel-user --sentinel-password-file
                set i (math $i + 1)
                if test $i -le (count $tokens)
                    set -a server $w $tokens[$i]
                end
            case '--url=*' '--prefix=*' '--config=*' '--user=*' '--password-file=*' '--cacert=*' '--cacertdir=*' '--cert=*' '--tls-key=*' '--sni=*' '--sentinel-user=*' '--sentinel-password-file=*' --tls --insecure
                set -a server $w
        end
        set i (math $i + 1)
    end
    command -q timeout; or return 0
    set -l rlock $tokens[1]
    # Text output: one lock per line, the name (or the full key PREFIX{NAME}) first.
    for line in (timeout 1 $rlock $server -q --list 2>/dev/null </dev/null)
        set -l name (string split -f1 -- ' ' (string trim -- $line))
        if string match -q -- '*{*}*' $name
            set name (string replace -r -- '^[^{]*\{(.*)\}[^}]*$' '$1' $name)
        end
        contains -- $name '' NAME KEY LOCK; and continue
        printf '%s\n' $name
    end
end

# Options that take a value as the next word.
set -g __rlock_opts_with_arg -k --key --prefix -w --wait --timeout -E --conflict-exit-code -t --ttl --on-lost --warn --kill-after --min-hold --once-per --lock-delay --max-hold -l --limit -c --command -u --url --user --password-file --cacert --cacertdir --cert --tls-key --sni --connect-timeout --io-timeout --node-timeout --wait-replicas --wait-aof --config --sentinel-user --sentinel-password-file --format --log-file --token --label
set -a __rlock_opts_with_arg --if-fence

# True once the wrapped command has started on the command line (after "--" or the
# first word that is neither an option nor an option's value).
function __rlock_in_command
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l skip 0
    for w in $tokens
        if test $skip -eq 1
            set skip 0
        else if test "$w" = --
            return 0
        else if contains -- $w $__rlock_opts_with_arg
            set skip 1
        else if not string match -q -- '-*' $w
            return 0
        end
    end
    return 1
end

set -l durations '500ms\tduration' '5s\tduration' '30s\tduration' '5m\tduration'
set -l modes '__fish_seen_argument -l status -l break -l reset -l list -l acquire -l release -l held'

complete -c rlock -f
# Lock
complete -c rlock -n "not __rlock_in_command" -s k -l key -x -a '(__rlock_locks)' -d 'Lock name'
complete -c rlock -n "not __rlock_in_command" -l prefix -x -d 'Key prefix (default rlock:)'
complete -c rlock -n "not __rlock_in_command" -s x -l exclusive -d 'Exclusive lock (the default, as flock -x)'
complete -c rlock -n "not __rlock_in_command" -s s -l shared -d 'Shared lock: many shared holders, no exclusive one'
complete -c rlock -n "not __rlock_in_command" -s l -l limit -x -d 'At most N holders at once (a semaphore)'
complete -c rlock -n "not __rlock_in_command" -l fair -d 'Waiters acquire in arrival order'
complete -c rlock -n "not __rlock_in_command" -s n -l no-wait -d 'Fail at once when the lock is busy'
complete -c rlock -n "not __rlock_in_command" -l nb -l nonblock -l nonblocking -d 'Same as --no-wait (flock\'s names)'
complete -c rlock -n "not __rlock_in_command" -s w -l wait -x -a "$durations" -d 'Wait at most this long'
complete -c rlock -n "not __rlock_in_command" -l timeout -x -a "$durations" -d 'Same as --wait'
complete -c rlock -n "not __rlock_in_command" -s E -l conflict-exit-code -x -a '0 75' -d 'Exit status when not acquired'
complete -c rlock -n "not __rlock_in_command" -s t -l ttl -x -a "$durations" -d 'Lease length (default 30s)'
complete -c rlock -n "not __rlock_in_command" -l on-lost -x -d 'When the lock is lost' -a '
    term\t"SIGTERM, SIGKILL after --kill-after"
    kill\t"SIGKILL at once"
    ignore\t"Only warn"
    HUP\tSignal INT\tSignal QUIT\tSignal USR1\tSignal USR2\tSignal'
complete -c rlock -n "not __rlock_in_command" -l warn -x -a 'USR1 USR2 HUP INT TERM none' -d 'Signal to the command when a renewal is late'
complete -c rlock -n "not __rlock_in_command" -l kill-after -x -a "$durations" -d 'Grace before SIGKILL (default 10s)'
complete -c rlock -n "not __rlock_in_command" -l min-hold -x -a "$durations" -d 'Hold the lock at least this long'
complete -c rlock -n "not __rlock_in_command" -l once-per -x -a "$durations" -d 'After a success, skip runs for this long'
complete -c rlock -n "not __rlock_in_command" -l lock-delay -x -a "$durations" -d 'Keep the name closed this long after a lease ends unreleased'
complete -c rlock -n "not __rlock_in_command" -l max-hold -x -a "$durations" -d 'Stop the command after this long (exit 124)'
complete -c rlock -n "not __rlock_in_command" -s c -l command -x -a '(__fish_complete_command)' -d 'Run with /bin/sh -c'
# Server
complete -c rlock -n "not __rlock_in_command" -s u -l url -x -a 'redis:// rediss:// unix:/// redis-sentinel:// rediss-sentinel://' -d 'Redis server URL'
complete -c rlock -n "not __rlock_in_command" -l user -x -a '(__fish_complete_users)' -d 'ACL user name'
complete -c rlock -n "not __rlock_in_command" -l password-file -r -F -d 'Read the password from a file'
complete -c rlock -n "not __rlock_in_command" -l sentinel-user -x -d 'The sentinels\' ACL user name'
complete -c rlock -n "not __rlock_in_command" -l sentinel-password-file -r -F -d 'Read the sentinels\' password from a file'
complete -c rlock -n "not __rlock_in_command" -l tls -d 'Use TLS'
complete -c rlock -n "not __rlock_in_command" -l cacert -r -F -d 'CA certificate file'
complete -c rlock -n "not __rlock_in_command" -l cacertdir -x -a '(__fish_complete_directories)' -d 'CA certificate directory'
complete -c rlock -n "not __rlock_in_command" -l cert -r -F -d 'Client certificate'
complete -c rlock -n "not __rlock_in_command" -l tls-key -r -F -d 'Client certificate private key'
complete -c rlock -n "not __rlock_in_command" -l sni -x -a '(__fish_print_hostnames)' -d 'TLS server name'
complete -c rlock -n "not __rlock_in_command" -l insecure -d 'Do not verify the server certificate'
complete -c rlock -n "not __rlock_in_command" -l connect-timeout -x -a "$durations" -d 'Connect deadline (default 2s)'
complete -c rlock -n "not __rlock_in_command" -l io-timeout -x -a "$durations" -d 'Per-request deadline (default 2s)'
complete -c rlock -n "not __rlock_in_command" -l node-timeout -x -a "$durations" -d 'Redlock: deadline of each node reply (default 200ms)'
complete -c rlock -n "not __rlock_in_command" -l wait-replicas -x -a '1 2' -d 'WAIT until N replicas have the lock'
complete -c rlock -n "not __rlock_in_command" -l wait-aof -x -a '1 1,1 0,1' -d 'WAITAOF until the AOF of the master (and N replicas) has the lock'
# Other
complete -c rlock -n "not __rlock_in_command" -l config -r -F -d 'Config file'
complete -c rlock -n "not __rlock_in_command" -s v -l verbose -d 'More diagnostics (repeatable)'
complete -c rlock -n "not __rlock_in_command" -s q -l quiet -d 'Only fatal errors'
complete -c rlock -n "not __rlock_in_command" -l json -d 'JSON output for --status, --list and --held'
complete -c rlock -l status -n "not __rlock_in_command; and not $modes" -d 'Show who holds the lock'
complete -c rlock -l break -n "not __rlock_in_command; and not $modes" -d 'Force release the lock'
complete -c rlock -l reset -n "not __rlock_in_command; and not $modes" -d 'Clear the lock-delay and --once-per marks (not a holder)'
complete -c rlock -l list -n "not __rlock_in_command; and not $modes" -d 'List held locks'
complete -c rlock -l check -n "not __rlock_in_command; and not $modes" -d 'Check the deployment: ok/warn/unsafe findings and a verdict'
complete -c rlock -l acquire -n "not __rlock_in_command; and not $modes" -d 'Take the lock, leave a keeper, print its variables'
complete -c rlock -l release -n "not __rlock_in_command; and not $modes" -d 'Stop the keeper and release'
complete -c rlock -l held -n "not __rlock_in_command; and not $modes" -d 'Exit 0 if the job still holds the lock, 79 if not'
# Deploy queues and the history
set -ga __rlock_opts_with_arg --superseded-exit-code
complete -c rlock -n "not __rlock_in_command" -l supersede -d 'Wait as the newest request only (a newer one replaces it: exit 80)'
complete -c rlock -n "not __rlock_in_command" -l superseded-exit-code -x -a '0 80' -d 'Exit status when superseded'
complete -c rlock -n "not __rlock_in_command" -l preempt -d 'Ask a --preemptible holder to stop and release'
complete -c rlock -n "not __rlock_in_command" -l preemptible -d 'Let a --preempt request stop the command (exit 81)'
complete -c rlock -l history -n "not __rlock_in_command; and not $modes" -d "Show the lock's runs, newest first"
complete -c rlock -n "not __rlock_in_command" -l format -x -a 'sh github' -d 'Output of --acquire'
complete -c rlock -n "not __rlock_in_command" -l log-file -r -F -d 'The keeper log file'
complete -c rlock -n "not __rlock_in_command" -l token -x -d 'Token to release or ask about (default $RLOCK_TOKEN)'
complete -c rlock -n "not __rlock_in_command" -l if-fence -x -d '--break: only the holder of this fence'
complete -c rlock -n "not __rlock_in_command" -l label -x -d 'Why the lock is held (shown to others)'
# Events and metrics
set -ga __rlock_opts_with_arg --events --metrics-file
complete -c rlock -n "not __rlock_in_command" -l events -r -F -d 'Append one JSON line per event to FILE (- for stderr)'
complete -c rlock -n "not __rlock_in_command" -l metrics-file -r -F -d 'Write Prometheus metrics of the run to PATH'
complete -c rlock -n "not __rlock_in_command" -s h -l help -d 'Show help'
complete -c rlock -n "not __rlock_in_command" -s V -l version -d 'Show version'
# The wrapped command and its arguments.
complete -c rlock -n "not $modes" -a "(__fish_complete_subcommand -- $__rlock_opts_with_arg)"
