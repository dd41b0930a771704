# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_mproute_global_optspecs
    string join \n j/json p/pretty n/netns= b/batch= force d/details s/stats check v/verbose wait= nexthop-objects h/help V/version
end

function __fish_mproute_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_mproute_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_mproute_using_subcommand
    set -l cmd (__fish_mproute_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c mproute -n "__fish_mproute_needs_command" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_needs_command" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_needs_command" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_needs_command" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_needs_command" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_needs_command" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_needs_command" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_needs_command" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_needs_command" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_needs_command" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_needs_command" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_needs_command" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_needs_command" -s V -l version -d 'Print version'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "add" -d 'Add a route; fails if it exists'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "replace" -d 'Add or replace a route (idempotent)'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "append" -d 'Add an alternative route (IPv4) or more nexthops to a route (IPv6)'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "change" -d 'Change an existing route; fails if there is none'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "del" -d 'Delete a route mproute owns'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "delete" -d 'Delete a route mproute owns'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "show" -d 'List routes with their algorithm and who enforces it'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "list" -d 'List routes with their algorithm and who enforces it'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "ls" -d 'List routes with their algorithm and who enforces it'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "flush" -d 'Remove every route mproute owns (in one table)'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "sync" -d 'Report and repair drift between the FIB and mproute\'s state; first put back nexthop objects the kernel deleted with a link that is up again'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "get" -d 'Show the nexthop the dataplane picks for a packet, and the hash'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "route" -d '`mproute route VERB ARGS`: the object word of iproute2, accepted and ignored'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "dataplane" -d 'Attach, detach and show the tc/XDP dataplane that carries out the algorithms; watch keeps its FIB check verified and puts back nexthop objects a link flap deleted'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "metrics" -d 'Print the dataplane\'s counters (routes, nexthops, verdicts) and attachments in the Prometheus text format, for node_exporter\'s textfile collector'
complete -c mproute -n "__fish_mproute_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c mproute -n "__fish_mproute_using_subcommand add" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand add" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand add" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand add" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand add" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand add" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand add" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand add" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand add" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand add" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand add" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand add" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand replace" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand replace" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand replace" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand replace" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand replace" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand replace" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand replace" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand replace" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand replace" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand replace" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand replace" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand replace" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand append" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand append" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand append" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand append" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand append" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand append" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand append" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand append" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand append" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand append" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand append" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand append" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand change" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand change" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand change" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand change" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand change" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand change" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand change" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand change" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand change" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand change" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand change" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand change" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand del" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand del" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand del" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand del" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand del" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand del" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand del" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand del" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand del" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand del" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand del" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand del" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand delete" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand delete" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand delete" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand delete" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand delete" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand delete" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand delete" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand delete" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand delete" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand delete" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand delete" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand delete" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand show" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand show" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand show" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand show" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand show" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand show" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand show" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand show" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand show" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand show" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand show" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand show" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand list" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand list" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand list" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand list" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand list" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand list" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand list" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand list" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand list" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand list" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand list" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand list" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand ls" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand ls" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand ls" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand ls" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand ls" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand ls" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand ls" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand ls" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand ls" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand ls" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand ls" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand ls" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand flush" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand flush" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand flush" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand flush" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand flush" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand flush" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand flush" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand flush" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand flush" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand flush" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand flush" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand flush" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand sync" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand sync" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand sync" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand sync" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand sync" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand sync" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand sync" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand sync" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand sync" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand sync" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand sync" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand sync" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand get" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand get" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand get" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand get" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand get" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand get" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand get" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand get" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand get" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand get" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand get" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand get" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand route" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand route" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand route" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand route" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand route" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand route" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand route" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand route" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand route" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand route" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand route" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand route" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand dataplane" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -s j -l json -d 'Output JSON'
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -s d -l details -d 'Show details'
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -s s -l stats -d 'Show statistics'
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -l nexthop-objects -d 'Install routes as references to kernel nexthop objects (Linux 5.3+): faster in bulk. The kernel deletes an object when its device goes down or loses its carrier (a group left empty, and its routes, with it) and never brings it back: run `mproute dataplane watch` (or `mproute sync` after a flap) to put the objects and routes back when the link is up'
complete -c mproute -n "__fish_mproute_using_subcommand metrics" -s h -l help -d 'Print help'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "add" -d 'Add a route; fails if it exists'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "replace" -d 'Add or replace a route (idempotent)'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "append" -d 'Add an alternative route (IPv4) or more nexthops to a route (IPv6)'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "change" -d 'Change an existing route; fails if there is none'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "del" -d 'Delete a route mproute owns'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "show" -d 'List routes with their algorithm and who enforces it'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "flush" -d 'Remove every route mproute owns (in one table)'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "sync" -d 'Report and repair drift between the FIB and mproute\'s state; first put back nexthop objects the kernel deleted with a link that is up again'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "get" -d 'Show the nexthop the dataplane picks for a packet, and the hash'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "route" -d '`mproute route VERB ARGS`: the object word of iproute2, accepted and ignored'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "dataplane" -d 'Attach, detach and show the tc/XDP dataplane that carries out the algorithms; watch keeps its FIB check verified and puts back nexthop objects a link flap deleted'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "metrics" -d 'Print the dataplane\'s counters (routes, nexthops, verdicts) and attachments in the Prometheus text format, for node_exporter\'s textfile collector'
complete -c mproute -n "__fish_mproute_using_subcommand help; and not __fish_seen_subcommand_from add replace append change del show flush sync get route dataplane metrics help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
