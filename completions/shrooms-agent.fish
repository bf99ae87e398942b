# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_shrooms_agent_global_optspecs
    string join \n json h/help V/version
end

function __fish_shrooms_agent_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_shrooms_agent_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_shrooms_agent_using_subcommand
    set -l cmd (__fish_shrooms_agent_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -s V -l version -d 'Print version'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "cage" -d 'Make, run, inspect and remove caged sessions'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "doctor" -d 'Check this machine: podman, rootless, cgroups, network, nft, seccomp, image'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "image" -d 'Build our images (workbench, desktop) and show how they stand'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "outbox" -d 'Read what a sealed session left in its outbox, or send it to a session'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "files" -d 'Whom a session takes files from (MACHINE/SESSION), and who was refused'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "serve" -d 'Serve the same operations over HTTP, for the apps and other machines'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "completions" -d 'Print a shell completion script to standard output'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "man" -d 'Print the man page (roff) to standard output'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "mcp" -d 'Serve the shrooms tools (list_agents, ask_agent, task_status, task_update, task_ack, send_file) as an MCP server on standard input and output, for a harness inside a cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "create" -d 'Record a session and make its container (made, not started)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "start" -d 'Start a session\'s container and close the agent port inside it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "stop" -d 'Stop a session\'s container, and everything running in it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "rm" -d 'Remove a session: its container, env file, private folders, history and record'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "move" -d 'Move a session into a fresh cage with new options, or out of its cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "limits" -d 'Set a session\'s memory, CPUs and process limits, running or not, and its token budget'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "history" -d 'What happened to a session: creation, moves, limits, each turn\'s tokens (when, who, what)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "accept-caged" -d 'Whether a session takes tasks and files from caged sessions ("caged tasks")'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "exec" -d 'Run a command in a session\'s cage; the cage stops when it ends'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "run" -d 'Run the session\'s harness (claude or pi) in its cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "ls" -d 'List the caged sessions, and containers left over without one'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "show" -d 'Show a session: its record, its container\'s state and the argv it was made with'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "prune" -d 'Remove leftovers this state folder made: containers with no session here, and their files. Containers another state folder made, or made before containers carried the state folder\'s label, are listed and kept. Asks first on a terminal; without one it removes nothing unless given --yes (exit 2)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and not __fish_seen_subcommand_from create start stop rm move limits history accept-caged exec run ls show prune help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l dir -d 'The project folder; mounted read-write at its own path' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l harness -d 'The harness the session runs' -r -f -a "claude\t''
pi\t''"
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l image -d 'The image (default: the config\'s `image`, else <images_repo>:latest, localhost/shrooms-workbench:latest unless the config says otherwise)' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l mesh -d 'A mesh the session is limited to (repeat for more): the shared folder is then the one of that set of meshes; only with --shared' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l sealed-token -d 'The machine\'s sealed token (default: the config\'s `sealed_token`, else sealed-claude-token in the state folder)' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l conversation -d 'Bring this Claude Code conversation of the project into the sealed cage: its transcript and the folder beside it are copied in, no other' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l dry-run -d 'Print the podman argv and the env file (secrets redacted), and change nothing'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l unseal -d 'Give an ordinary cage to a folder a sealed session worked in (refused without it: the folder is untrusted after a sealed session)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l github -d 'Mount your GitHub login (~/.config/gh) read-only and pass GH_* and GITHUB_*: the session can push, and open pull requests, as you'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l nix -d 'Give it the machine\'s nix: the store, your profile, your nix settings'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l shared -d 'Mount the shared folder at /shared, which every caged session given it sees'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l sealed -d 'Seal it, for code nobody vouches for: the internet and nothing local, its own login, no user namespaces, results only through its outbox'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from start" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from start" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from stop" -l all -d 'Stop every cage of this user; a busy one is passed over and named at the end (exit 3)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from stop" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from stop" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from rm" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l by -d 'Who moved it, for the history (default: the user running this); one line of at most 200 characters' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l image -d 'The image (default: the config\'s `image`, else <images_repo>:latest, localhost/shrooms-workbench:latest unless the config says otherwise)' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l mesh -d 'A mesh the session is limited to (repeat for more): the shared folder is then the one of that set of meshes; only with --shared' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l sealed-token -d 'The machine\'s sealed token (default: the config\'s `sealed_token`, else sealed-claude-token in the state folder)' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l conversation -d 'Bring this Claude Code conversation of the project into the sealed cage: its transcript and the folder beside it are copied in, no other' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l out -d 'Take the session out of its cage: its harness runs on the machine again'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l unseal -d 'Take a sealed session out of its seal (refused without it: its folder is untrusted after a sealed session)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l github -d 'Mount your GitHub login (~/.config/gh) read-only and pass GH_* and GITHUB_*: the session can push, and open pull requests, as you'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l nix -d 'Give it the machine\'s nix: the store, your profile, your nix settings'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l shared -d 'Mount the shared folder at /shared, which every caged session given it sees'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l sealed -d 'Seal it, for code nobody vouches for: the internet and nothing local, its own login, no user namespaces, results only through its outbox'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from move" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from limits" -l memory -d 'Memory, as podman reads it: 512m, 1.5g, 1gb, 16G; a number alone is bytes (at least 6m, podman\'s minimum)' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from limits" -l cpus -d 'CPUs: a number from 0.01 up to the machine\'s' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from limits" -l pids -d 'Processes: a positive whole number' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from limits" -l tokens -d 'Token budget: once the session\'s turns have spent N tokens (input, output and cache together), the model gateway refuses its model requests; `none` removes it. Works on any machine, running or not' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from limits" -l by -d 'Who changed them, for the history (default: the user running this); one line of at most 200 characters' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from limits" -l reset -d 'Back to the machine\'s limits (the config\'s), and no token budget'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from limits" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from limits" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from history" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from history" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from accept-caged" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from accept-caged" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from exec" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from exec" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from run" -l uncaged -d 'Run the harness on this machine, outside any cage, when the session is not in one'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from run" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from ls" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from ls" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from show" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from prune" -l dry-run -d 'Say what would be removed, and remove nothing (writes nothing at all)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from prune" -s y -l yes -d 'Remove without asking'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from prune" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "create" -d 'Record a session and make its container (made, not started)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "start" -d 'Start a session\'s container and close the agent port inside it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "stop" -d 'Stop a session\'s container, and everything running in it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "rm" -d 'Remove a session: its container, env file, private folders, history and record'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "move" -d 'Move a session into a fresh cage with new options, or out of its cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "limits" -d 'Set a session\'s memory, CPUs and process limits, running or not, and its token budget'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "history" -d 'What happened to a session: creation, moves, limits, each turn\'s tokens (when, who, what)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "accept-caged" -d 'Whether a session takes tasks and files from caged sessions ("caged tasks")'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "exec" -d 'Run a command in a session\'s cage; the cage stops when it ends'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "run" -d 'Run the session\'s harness (claude or pi) in its cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "ls" -d 'List the caged sessions, and containers left over without one'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "show" -d 'Show a session: its record, its container\'s state and the argv it was made with'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "prune" -d 'Remove leftovers this state folder made: containers with no session here, and their files. Containers another state folder made, or made before containers carried the state folder\'s label, are listed and kept. Asks first on a terminal; without one it removes nothing unless given --yes (exit 2)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand cage; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand doctor" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and not __fish_seen_subcommand_from build status help" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and not __fish_seen_subcommand_from build status help" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and not __fish_seen_subcommand_from build status help" -f -a "build" -d 'Build an image of ours from the Containerfile compiled in (or --containerfile), labelled with its hash; in the background unless --wait'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and not __fish_seen_subcommand_from build status help" -f -a "status" -d 'Show the machine\'s image and ours: present, current, being built, the last build\'s error'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and not __fish_seen_subcommand_from build status help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and __fish_seen_subcommand_from build" -l containerfile -d 'Build from this Containerfile instead of the one compiled in (its stages must be named workbench and desktop); the label carries its hash' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and __fish_seen_subcommand_from build" -l wait -d 'Build in the foreground, show its progress, and return its result'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and __fish_seen_subcommand_from build" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and __fish_seen_subcommand_from build" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and __fish_seen_subcommand_from status" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and __fish_seen_subcommand_from help" -f -a "build" -d 'Build an image of ours from the Containerfile compiled in (or --containerfile), labelled with its hash; in the background unless --wait'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and __fish_seen_subcommand_from help" -f -a "status" -d 'Show the machine\'s image and ours: present, current, being built, the last build\'s error'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand image; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and not __fish_seen_subcommand_from pack send help" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and not __fish_seen_subcommand_from pack send help" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and not __fish_seen_subcommand_from pack send help" -f -a "pack" -d 'Pack a sealed session\'s outbox into a .tar.gz: regular files only, links never followed, with a README-UNTRUSTED.txt listing what was left out'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and not __fish_seen_subcommand_from pack send help" -f -a "send" -d 'Pack a sealed session\'s outbox and send it to a session on a machine (the config\'s [machines], or this one): it arrives in that session\'s uploads, if that session takes files from this one'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and not __fish_seen_subcommand_from pack send help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from pack" -s o -l output -d 'The archive to write: a new file outside the outbox (an existing regular file only with --force; never a device, a FIFO, a folder or a link)' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from pack" -l only -d 'Pack only this folder of the outbox (a relative path)' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from pack" -l force -d 'Replace FILE if it is there and a regular file'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from pack" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from pack" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from send" -l only -d 'Send only this folder of the outbox (a relative path)' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from send" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from send" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from help" -f -a "pack" -d 'Pack a sealed session\'s outbox into a .tar.gz: regular files only, links never followed, with a README-UNTRUSTED.txt listing what was left out'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from help" -f -a "send" -d 'Pack a sealed session\'s outbox and send it to a session on a machine (the config\'s [machines], or this one): it arrives in that session\'s uploads, if that session takes files from this one'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand outbox; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and not __fish_seen_subcommand_from allow deny list help" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and not __fish_seen_subcommand_from allow deny list help" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and not __fish_seen_subcommand_from allow deny list help" -f -a "allow" -d 'Take files from a sender: MACHINE/SESSION, or MACHINE/* for all of its sessions'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and not __fish_seen_subcommand_from allow deny list help" -f -a "deny" -d 'Take no more files from a sender'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and not __fish_seen_subcommand_from allow deny list help" -f -a "list" -d 'Show whom a session takes files from, and the last ten refused'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and not __fish_seen_subcommand_from allow deny list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and __fish_seen_subcommand_from allow" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and __fish_seen_subcommand_from allow" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and __fish_seen_subcommand_from deny" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and __fish_seen_subcommand_from deny" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and __fish_seen_subcommand_from list" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and __fish_seen_subcommand_from help" -f -a "allow" -d 'Take files from a sender: MACHINE/SESSION, or MACHINE/* for all of its sessions'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and __fish_seen_subcommand_from help" -f -a "deny" -d 'Take no more files from a sender'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and __fish_seen_subcommand_from help" -f -a "list" -d 'Show whom a session takes files from, and the last ten refused'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand files; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand serve" -l listen -d 'The address to listen on (default: 127.0.0.1 and the config\'s agent_port, 7387). An address other than loopback needs --token-file, and the port agent_port' -r
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand serve" -l token-file -d 'A file holding a token: every request must then carry `Authorization: Bearer <token>`' -r -F
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand serve" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand serve" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand completions" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand completions" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand man" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand man" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand mcp" -l sealed -d 'Offer only task_update, the one tool a sealed cage\'s socket lets through'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand mcp" -l json -d 'Print the result as JSON instead of text'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand mcp" -s h -l help -d 'Print help'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor image outbox files serve completions man mcp help" -f -a "cage" -d 'Make, run, inspect and remove caged sessions'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor image outbox files serve completions man mcp help" -f -a "doctor" -d 'Check this machine: podman, rootless, cgroups, network, nft, seccomp, image'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor image outbox files serve completions man mcp help" -f -a "image" -d 'Build our images (workbench, desktop) and show how they stand'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor image outbox files serve completions man mcp help" -f -a "outbox" -d 'Read what a sealed session left in its outbox, or send it to a session'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor image outbox files serve completions man mcp help" -f -a "files" -d 'Whom a session takes files from (MACHINE/SESSION), and who was refused'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor image outbox files serve completions man mcp help" -f -a "serve" -d 'Serve the same operations over HTTP, for the apps and other machines'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor image outbox files serve completions man mcp help" -f -a "completions" -d 'Print a shell completion script to standard output'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor image outbox files serve completions man mcp help" -f -a "man" -d 'Print the man page (roff) to standard output'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor image outbox files serve completions man mcp help" -f -a "mcp" -d 'Serve the shrooms tools (list_agents, ask_agent, task_status, task_update, task_ack, send_file) as an MCP server on standard input and output, for a harness inside a cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and not __fish_seen_subcommand_from cage doctor image outbox files serve completions man mcp help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "create" -d 'Record a session and make its container (made, not started)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "start" -d 'Start a session\'s container and close the agent port inside it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "stop" -d 'Stop a session\'s container, and everything running in it'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "rm" -d 'Remove a session: its container, env file, private folders, history and record'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "move" -d 'Move a session into a fresh cage with new options, or out of its cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "limits" -d 'Set a session\'s memory, CPUs and process limits, running or not, and its token budget'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "history" -d 'What happened to a session: creation, moves, limits, each turn\'s tokens (when, who, what)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "accept-caged" -d 'Whether a session takes tasks and files from caged sessions ("caged tasks")'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "exec" -d 'Run a command in a session\'s cage; the cage stops when it ends'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "run" -d 'Run the session\'s harness (claude or pi) in its cage'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "ls" -d 'List the caged sessions, and containers left over without one'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "show" -d 'Show a session: its record, its container\'s state and the argv it was made with'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from cage" -f -a "prune" -d 'Remove leftovers this state folder made: containers with no session here, and their files. Containers another state folder made, or made before containers carried the state folder\'s label, are listed and kept. Asks first on a terminal; without one it removes nothing unless given --yes (exit 2)'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from image" -f -a "build" -d 'Build an image of ours from the Containerfile compiled in (or --containerfile), labelled with its hash; in the background unless --wait'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from image" -f -a "status" -d 'Show the machine\'s image and ours: present, current, being built, the last build\'s error'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from outbox" -f -a "pack" -d 'Pack a sealed session\'s outbox into a .tar.gz: regular files only, links never followed, with a README-UNTRUSTED.txt listing what was left out'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from outbox" -f -a "send" -d 'Pack a sealed session\'s outbox and send it to a session on a machine (the config\'s [machines], or this one): it arrives in that session\'s uploads, if that session takes files from this one'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from files" -f -a "allow" -d 'Take files from a sender: MACHINE/SESSION, or MACHINE/* for all of its sessions'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from files" -f -a "deny" -d 'Take no more files from a sender'
complete -c shrooms-agent -n "__fish_shrooms_agent_using_subcommand help; and __fish_seen_subcommand_from files" -f -a "list" -d 'Show whom a session takes files from, and the last ten refused'
