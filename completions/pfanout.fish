# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_pfanout_global_optspecs
    string join \n j/json p/pretty n/netns= b/batch= force d/details s/stats check v/verbose wait= h/help V/version
end

function __fish_pfanout_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_pfanout_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_pfanout_using_subcommand
    set -l cmd (__fish_pfanout_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c pfanout -n "__fish_pfanout_needs_command" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c pfanout -n "__fish_pfanout_needs_command" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c pfanout -n "__fish_pfanout_needs_command" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c pfanout -n "__fish_pfanout_needs_command" -s j -l json -d 'Output JSON'
complete -c pfanout -n "__fish_pfanout_needs_command" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c pfanout -n "__fish_pfanout_needs_command" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c pfanout -n "__fish_pfanout_needs_command" -s d -l details -d 'Show details'
complete -c pfanout -n "__fish_pfanout_needs_command" -s s -l stats -d 'Show statistics'
complete -c pfanout -n "__fish_pfanout_needs_command" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c pfanout -n "__fish_pfanout_needs_command" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c pfanout -n "__fish_pfanout_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pfanout -n "__fish_pfanout_needs_command" -s V -l version -d 'Print version'
complete -c pfanout -n "__fish_pfanout_needs_command" -f -a "show" -d 'The fanout groups of the namespace, their members and owners'
complete -c pfanout -n "__fish_pfanout_needs_command" -f -a "run" -d 'Run a fanout group of worker sockets and count what each receives'
complete -c pfanout -n "__fish_pfanout_needs_command" -f -a "bench" -d 'The rollover experiment between two throwaway namespaces'
complete -c pfanout -n "__fish_pfanout_needs_command" -f -a "metrics" -d 'Print the fanout groups, their members and drops in the Prometheus text format, for node_exporter\'s textfile collector'
complete -c pfanout -n "__fish_pfanout_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -s j -l json -d 'Output JSON'
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -s d -l details -d 'Show details'
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -s s -l stats -d 'Show statistics'
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c pfanout -n "__fish_pfanout_using_subcommand show" -s h -l help -d 'Print help'
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -s j -l json -d 'Output JSON'
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -s d -l details -d 'Show details'
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -s s -l stats -d 'Show statistics'
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c pfanout -n "__fish_pfanout_using_subcommand run" -s h -l help -d 'Print help'
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -s j -l json -d 'Output JSON'
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -s d -l details -d 'Show details'
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -s s -l stats -d 'Show statistics'
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c pfanout -n "__fish_pfanout_using_subcommand bench" -s h -l help -d 'Print help'
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -s j -l json -d 'Output JSON'
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -s d -l details -d 'Show details'
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -s s -l stats -d 'Show statistics'
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c pfanout -n "__fish_pfanout_using_subcommand metrics" -s h -l help -d 'Print help'
complete -c pfanout -n "__fish_pfanout_using_subcommand help; and not __fish_seen_subcommand_from show run bench metrics help" -f -a "show" -d 'The fanout groups of the namespace, their members and owners'
complete -c pfanout -n "__fish_pfanout_using_subcommand help; and not __fish_seen_subcommand_from show run bench metrics help" -f -a "run" -d 'Run a fanout group of worker sockets and count what each receives'
complete -c pfanout -n "__fish_pfanout_using_subcommand help; and not __fish_seen_subcommand_from show run bench metrics help" -f -a "bench" -d 'The rollover experiment between two throwaway namespaces'
complete -c pfanout -n "__fish_pfanout_using_subcommand help; and not __fish_seen_subcommand_from show run bench metrics help" -f -a "metrics" -d 'Print the fanout groups, their members and drops in the Prometheus text format, for node_exporter\'s textfile collector'
complete -c pfanout -n "__fish_pfanout_using_subcommand help; and not __fish_seen_subcommand_from show run bench metrics help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
