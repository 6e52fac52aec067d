# bash completion for deployctl(1), the client of deployd.
#
# Completes the commands, each command's flags, plan files (*.yaml, *.yml), the states of
# `runs --state`, and the run and step ids and plan names deployd knows: run ids and plan names
# from `deployctl runs --json`, a run's step ids from `deployctl status RUN --json`, asked of the
# daemon that the command line names (its --host and --socket, else $DEPLOYD_SOCKET, else the
# default). When deployd cannot be reached, ids complete to nothing and nothing is printed.
# Needs no bash-completion helpers.
# Installed as share/bash-completion/completions/deployctl.

# The "id" strings (or those of key $2) of the JSON objects at nesting depth $1 on stdin: 2 for
# the runs of `runs --json` (an array of objects), 3 for the steps of `status --json`. Strings
# are split out first, so braces and quotes inside them (a reason, an excerpt) do not count.
_deployctl_json_ids() {
  awk -v want="$1" -v key="${2:-id}" '
    { text = text $0 "\n" }
    END {
      gsub(/\\\\/, "__", text)
      gsub(/\\"/, "__", text)
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
}

# Runs the deployctl being completed ($1, as typed) with the rest of the arguments, briefly
# and silently: a daemon that is down or slow gives no output, not an error.
_deployctl_ask() {
  local program=${1/#\~/$HOME}
  shift
  if command -v timeout >/dev/null 2>&1; then
    timeout 3 "$program" "$@" 2>/dev/null </dev/null
  else
    "$program" "$@" 2>/dev/null </dev/null
  fi
}

_deployctl() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  local program=${COMP_WORDS[0]}
  local verbs="validate apply plan runs status show watch logs why cancel retry skip pause"
  verbs+=" resume approve delete prune dial-stdio rollout rollout-batch history metrics version"
  local -a socket=()
  local verb= i=1 word
  COMPREPLY=()

  # Global options may come anywhere, before the command or after it; --socket VALUE or
  # --socket=VALUE (which bash splits at the '='), the same for --host.
  while ((i < COMP_CWORD)); do
    word=${COMP_WORDS[i]}
    case $word in
      --socket | --host | --config)
        if [[ ${COMP_WORDS[i + 1]} == "=" ]]; then
          socket+=("$word" "${COMP_WORDS[i + 2]}")
          ((i += 3))
        else
          socket+=("$word" "${COMP_WORDS[i + 1]}")
          ((i += 2))
        fi
        continue
        ;;
      -*) ;;
      *)
        verb=$word
        break
        ;;
    esac
    ((i++))
  done

  if [[ -z $verb ]]; then
    local before=
    ((COMP_CWORD > 1)) && before=${COMP_WORDS[COMP_CWORD - 2]}
    if [[ $prev == --socket || $prev == --config ||
      ($prev == "=" && ($before == --socket || $before == --config)) ]]; then
      [[ $cur == "=" ]] && cur=
      compopt -o filenames 2>/dev/null
      COMPREPLY=($(compgen -f -- "$cur"))
    elif [[ $prev == --host || ($prev == "=" && ${COMP_WORDS[COMP_CWORD - 2]} == --host) ]]; then
      return 0
    elif [[ $cur == -* ]]; then
      COMPREPLY=($(compgen -W "--socket --host --config --help --version -h" -- "$cur"))
    else
      COMPREPLY=($(compgen -W "$verbs" -- "$cur"))
    fi
    return 0
  fi

  # After the command: its positionals so far (--var, --limit, … take a value; --plan of runs,
  # not of show), and the global options given there.
  local -a positionals=()
  local skip=
  for ((i = i + 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [[ -n $skip ]]; then
      skip=
      continue
    fi
    case $word in
      --socket | --host | --config)
        socket+=("$word" "${COMP_WORDS[i + 1]}")
        skip=1
        ;;
      --var | -l | --limit | --serial | --max-fail | --unreachable-after | --key | --batch) skip=1 ;;
      -i | --inventory | --state | --since | --before | --older-than) skip=1 ;;
      --plan) [[ $verb == runs ]] && skip=1 ;;
      -*) ;;
      *) positionals+=("$word") ;;
    esac
  done
  case $prev in
    --var | -l | --limit | --serial | --max-fail | --unreachable-after | --key | --batch | --host)
      return 0
      ;;
    --since | --before | --older-than)
      return 0
      ;;
    --state)
      COMPREPLY=($(compgen -W "pending running paused waiting succeeded failed cancelled" -- "$cur"))
      return 0
      ;;
    --socket | --config)
      compopt -o filenames 2>/dev/null
      COMPREPLY=($(compgen -f -- "$cur"))
      return 0
      ;;
    -i | --inventory)
      compopt -o filenames 2>/dev/null
      COMPREPLY=($(compgen -f -- "$cur"))
      return 0
      ;;
  esac

  local flags="-h --help"
  case $verb in
    validate) flags+=" --var --json" ;;
    apply) flags+=" --var --wait --wait-lock --json" ;;
    plan) flags+=" --var --json" ;;
    runs) flags+=" --plan --state --since --limit --before --all --json" ;;
    show) flags+=" --plan --json" ;;
    prune) flags+=" --older-than --json" ;;
    status | why | watch | version | metrics) flags+=" --json" ;;
    cancel | pause | resume | approve | delete) flags+=" --json" ;;
    logs) flags+=" -f --follow -t --timestamps --json" ;;
    retry | skip) flags+=" --wait --json" ;;
    rollout)
      flags+=" -i --inventory -l --limit --serial --max-fail --var --unreachable-after --wait"
      flags+=" --json"
      ;;
    rollout-batch) flags+=" --key --batch" ;;
    history) flags+=" --limit --json" ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    return 0
  fi

  local want=
  [[ $verb == runs && $prev == --plan ]] && want=plan_name
  [[ -z $want ]] && case $verb:${#positionals[@]} in
    validate:* | apply:0 | plan:0 | rollout:0) want=plan ;;
    status:0 | watch:0 | why:0 | cancel:0 | pause:0 | resume:0) want=run ;;
    show:0 | delete:0) want=run ;;
    logs:0 | retry:0 | skip:0 | approve:0) want=run ;;
    logs:1 | retry:1 | skip:1 | approve:1) want=step ;;
    history:0) want=plan_name ;;
  esac
  local IFS=$'\n'
  case $want in
    plan)
      compopt -o filenames 2>/dev/null
      COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.yaml' -- "$cur")
        $(compgen -f -X '!*.yml' -- "$cur"))
      ;;
    run)
      COMPREPLY=($(compgen -W "$(_deployctl_ask "$program" "${socket[@]}" runs --json |
        _deployctl_json_ids 2)" -- "$cur"))
      ;;
    step)
      COMPREPLY=($(compgen -W "$(_deployctl_ask "$program" "${socket[@]}" status \
        "${positionals[0]}" --json | _deployctl_json_ids 3)" -- "$cur"))
      ;;
    plan_name)
      COMPREPLY=($(compgen -W "$(_deployctl_ask "$program" "${socket[@]}" runs --json |
        _deployctl_json_ids 2 plan | sort -u)" -- "$cur"))
      ;;
  esac
  return 0
}

complete -F _deployctl deployctl
