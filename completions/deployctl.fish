# fish completion for deployctl(1), the client of deployd.
#
# Completes the commands, each command's flags, plan files (*.yaml, *.yml), the states of
# `runs --state`, and the run and step ids and plan names deployd knows: run ids and plan names
# from `deployctl runs --json`, a run's step ids from `deployctl status RUN --json`, asked of the
# daemon that the command line names (its --socket, else $DEPLOYD_SOCKET, else the default).
# When deployd cannot be reached, ids complete to nothing and nothing is printed.
# Installed as share/fish/vendor_completions.d/deployctl.fish.

# The "id" strings (or those of key $argv[2]) of the JSON objects at nesting depth $argv[1] on
# stdin: 2 for the runs of `runs --json`, 3 for the steps of `status --json` (the same program
# as the bash completion; fish reads \\ in single quotes as one backslash, so the regexes have
# twice as many).
function __deployctl_json_ids
    set -l key id
    set -q argv[2]; and set key $argv[2]
    awk -v want=$argv[1] -v key=$key '
    { text = text $0 "\n" }
    END {
      gsub(/\\\\\\\\/, "__", text)
      gsub(/\\\\"/, "__", text)
      n = split(text, part, "\"")
      depth = 0
      for (i = 1; i <= n; i++) {
        if (i % 2 == 1) {
          depth += gsub(/[[{]/, "&", part[i]) - gsub(/[]}]/, "&", part[i])
        } else if (part[i] == key && depth == want && i + 2 <= n &&
                   part[i + 1] ~ /^[ \t\r\n]*:[ \t\r\n]*$/) {
          print part[i + 2]
        }
      }
    }'
end

# Where the command line stands: the command (verb), the positionals after it, and the
# --socket option before it. Prints "VERB", then "POSITION N" (the positional being completed,
# from 1), then the socket option if any, one per line.
function __deployctl_parse
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l verb
    set -l socket
    set -l positionals
    set -l skip
    for t in $tokens
        if test -n "$skip"
            test "$skip" = socket; and set socket --socket $t
            set skip
            continue
        end
        switch $t
            case --socket --host --config
                set skip socket
            case '--socket=*'
                set socket --socket (string replace -- --socket= '' $t)
            case '--host=*'
            case --var -i --inventory -l --limit --serial --max-fail --unreachable-after --key --batch \
                --state --since --before --older-than
                set skip var
            case --plan
                test "$verb" = runs; and set skip var
            case '-*'
            case '*'
                if test -z "$verb"
                    set verb $t
                else
                    set -a positionals $t
                end
        end
    end
    echo $verb
    echo (math (count $positionals) + 1)
    printf '%s\n' $positionals
end

# Whether the word being completed is a KIND (plan, run or step).
function __deployctl_wants --argument-names kind
    set -l state (__deployctl_parse)
    set -l verb $state[1]
    set -l position $state[2]
    switch $kind
        case plan
            contains -- $verb validate; and return 0
            contains -- $verb apply plan rollout; and test $position = 1
        case run
            contains -- $verb status show watch why cancel pause resume logs retry skip approve \
                delete
            and test $position = 1
        case step
            contains -- $verb logs retry skip approve; and test $position = 2
        case plan_name
            contains -- $verb history; and test $position = 1
        case '*'
            return 1
    end
end

# The deployctl being completed, asked briefly and silently (a daemon that is down or slow
# gives no output, not an error), with the global options of the line, wherever they are.
function __deployctl_ask
    set -l tokens (commandline -opc)
    set -l program $tokens[1]
    set -l socket
    set -l i 2
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case --socket --host --config
                set -a socket $tokens[$i] $tokens[(math $i + 1)]
                set i (math $i + 1)
            case '--socket=*' '--host=*' '--config=*'
                set -a socket $tokens[$i]
        end
        set i (math $i + 1)
    end
    if command -q timeout
        timeout 3 $program $socket $argv 2>/dev/null </dev/null
    else
        $program $socket $argv 2>/dev/null </dev/null
    end
end

function __deployctl_runs
    __deployctl_ask runs --json | __deployctl_json_ids 2
end

function __deployctl_plan_names
    __deployctl_ask runs --json | __deployctl_json_ids 2 plan | sort -u
end

function __deployctl_steps
    set -l state (__deployctl_parse)
    set -q state[3]; or return
    __deployctl_ask status $state[3] --json | __deployctl_json_ids 3
end

# Directories, and files named *.yaml or *.yml, that start with the word being completed.
function __deployctl_plans
    set -l token (commandline -ct)
    for path in $token*
        if test -d $path
            echo $path/
        else if string match -qr '\.ya?ml$' -- $path
            echo $path
        end
    end
end

set -l verbs validate apply plan runs status show watch logs why cancel retry skip pause resume \
    approve delete prune dial-stdio rollout rollout-batch history metrics version
set -l top "not __fish_seen_subcommand_from $verbs"
set -l after __fish_seen_subcommand_from
complete -c deployctl -f

# Before the command.
complete -c deployctl -n $top -l socket -r -F -d "deployd's socket"
complete -c deployctl -n $top -l host -x -d 'Reach deployd on another host: ssh://[USER@]HOST[:PORT]'
complete -c deployctl -n $top -l config -r -F -d "deployd's configuration, read for its socket"
complete -c deployctl -n $top -l version -d 'Print the version and exit'
complete -c deployctl -s h -l help -d 'Print help and exit'
complete -c deployctl -n $top -a validate -d 'Check plans without running them (offline)'
complete -c deployctl -n $top -a apply -d 'Start a run of a plan; prints the run id first'
complete -c deployctl -n $top -a plan -d 'Dry run: the resolved steps, and which checks pass now'
complete -c deployctl -n $top -a runs -d 'List runs, newest first'
complete -c deployctl -n $top -a status -d 'Show a run and its steps'
complete -c deployctl -n $top -a show -d "Show a run's record; --plan: the plan's text as applied"
complete -c deployctl -n $top -a watch -d 'Show a run live until it ends'
complete -c deployctl -n $top -a logs -d "Print the output of a run's steps"
complete -c deployctl -n $top -a why -d 'Show the evidence of a failed run'
complete -c deployctl -n $top -a cancel -d 'Stop a run: its running step and all after it'
complete -c deployctl -n $top -a retry -d 'Run a failed or cancelled run again from a step'
complete -c deployctl -n $top -a skip -d 'Mark a step skipped and let its run go on'
complete -c deployctl -n $top -a pause -d 'Start no new step until resumed'
complete -c deployctl -n $top -a resume -d 'Let a paused run go on'
complete -c deployctl -n $top -a approve -d 'Let an approval step that is waiting go on'
complete -c deployctl -n $top -a delete -d 'Forget a finished run: its record, events and logs'
complete -c deployctl -n $top -a prune -d 'Forget the runs that finished longer ago than a duration'
complete -c deployctl -n $top -a dial-stdio -d "Join stdin and stdout to deployd's socket (for --host)"
complete -c deployctl -n $top -a rollout -d 'Apply a plan across an Ansible inventory, in batches'
complete -c deployctl -n $top -a rollout-batch -d "Drive one batch of a rollout (its steps run it)"
complete -c deployctl -n $top -a history -d "What a plan's runs measured (version, tokens/s, TTFT)"
complete -c deployctl -n $top -a metrics -d 'What deployd exports to Prometheus, in its text format'
complete -c deployctl -n $top -a version -d "Versions of deployctl and of the deployd it reaches"

# Each command's flags.
complete -c deployctl -n "$after validate apply plan rollout" -l var -x -d 'NAME=VALUE override'
complete -c deployctl -n "$after rollout" -s i -l inventory -r -F -d 'Ansible inventory (INI or YAML)'
complete -c deployctl -n "$after rollout" -s l -l limit -x -d 'Only these hosts: an Ansible pattern'
complete -c deployctl -n "$after rollout" -l serial -x -d 'Batch size, N or N%'
complete -c deployctl -n "$after rollout" -l max-fail -x -d 'Failed hosts a batch may have, K or K%'
complete -c deployctl -n "$after rollout" -l unreachable-after -x -d 'How long a host may stay unreachable'
complete -c deployctl -n "$after rollout" -l wait -d 'Show the hosts live until the rollout ends'
complete -c deployctl -n "$after rollout-batch" -l key -x -d "The rollout's key"
complete -c deployctl -n "$after rollout-batch" -l batch -x -d 'The batch, from 1, or all'
complete -c deployctl -n "$after apply" -l wait -d 'Show progress until the run ends; exit 1 if it fails'
complete -c deployctl -n "$after apply" -l wait-lock -d 'Queue the run after the one holding the plan\'s lock'
complete -c deployctl -n "$after retry skip" -l wait -d 'Show progress until the run ends'
complete -c deployctl -n "$after plan status show why history version" -l json -d 'Print one JSON object'
complete -c deployctl -n "$after runs validate" -l json -d 'Print a JSON array'
complete -c deployctl -n "$after apply cancel pause resume approve retry skip rollout delete prune" -l json -d 'Print what was done as JSON'
complete -c deployctl -n "$after runs" -l plan -x -a "(__deployctl_plan_names)" -d 'Only the runs of this plan'
complete -c deployctl -n "$after runs" -l state -x -a 'pending running paused waiting succeeded failed cancelled' -d 'Only the runs in this state'
complete -c deployctl -n "$after runs" -l since -x -d 'Only the runs created within the last DURATION'
complete -c deployctl -n "$after runs" -l limit -x -d 'At most N, the newest'
complete -c deployctl -n "$after runs" -l before -x -d 'Only the runs numbered below N'
complete -c deployctl -n "$after runs" -l all -d 'Every run that matches'
complete -c deployctl -n "$after show" -l plan -d "Then print the plan's text exactly as it was applied"
complete -c deployctl -n "$after prune" -l older-than -x -d 'The runs that finished longer ago than this'
complete -c deployctl -n "$after metrics" -l json -d 'Print the metric families as one JSON array'
complete -c deployctl -n "$after watch" -l json -d 'Print the follow stream, one JSON object per line'
complete -c deployctl -n "$after logs" -s f -l follow -d "Print STEP's output as it grows"
complete -c deployctl -n "$after logs" -s t -l timestamps -d 'Begin each line with the time it was written'
complete -c deployctl -n "$after logs" -l json -d 'Print JSON'
complete -c deployctl -n "$after history" -l limit -x -d 'At most this many runs (default 20; 0: all)'

# Positionals: plan files, run ids, step ids.
complete -c deployctl -n "__deployctl_wants plan" -k -a "(__deployctl_plans)"
complete -c deployctl -n "__deployctl_wants run" -a "(__deployctl_runs)" -d run
complete -c deployctl -n "__deployctl_wants step" -a "(__deployctl_steps)" -d step
complete -c deployctl -n "__deployctl_wants plan_name" -a "(__deployctl_plan_names)" -d plan
