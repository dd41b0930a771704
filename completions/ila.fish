# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_ila_global_optspecs
    string join \n j/json p/pretty n/netns= b/batch= force d/details s/stats check v/verbose wait= backend= h/help V/version
end

function __fish_ila_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_ila_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_ila_using_subcommand
    set -l cmd (__fish_ila_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c ila -n "__fish_ila_needs_command" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c ila -n "__fish_ila_needs_command" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c ila -n "__fish_ila_needs_command" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c ila -n "__fish_ila_needs_command" -l backend -d 'The implementation: kernel, bpf or auto' -r -f -a "auto\t'The kernel\'s where it has the generic netlink family "ila", else bpf'
kernel\t'The kernel\'s ILA module (generic netlink and LWT encap)'
bpf\t'ila\'s BPF translator (XDP/tc programs and pinned maps)'"
complete -c ila -n "__fish_ila_needs_command" -s j -l json -d 'Output JSON'
complete -c ila -n "__fish_ila_needs_command" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c ila -n "__fish_ila_needs_command" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c ila -n "__fish_ila_needs_command" -s d -l details -d 'Show details'
complete -c ila -n "__fish_ila_needs_command" -s s -l stats -d 'Show statistics'
complete -c ila -n "__fish_ila_needs_command" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c ila -n "__fish_ila_needs_command" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c ila -n "__fish_ila_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ila -n "__fish_ila_needs_command" -s V -l version -d 'Print version'
complete -c ila -n "__fish_ila_needs_command" -f -a "xlat" -d 'The receive side: mappings from a locator to another (ILA to SIR), as ip ila'
complete -c ila -n "__fish_ila_needs_command" -f -a "route" -d 'The send side: routes that give SIR destinations their locator (SIR to ILA)'
complete -c ila -n "__fish_ila_needs_command" -f -a "dataplane" -d 'The BPF translator on devices (bpf backend)'
complete -c ila -n "__fish_ila_needs_command" -f -a "metrics" -d 'Print the mappings and routes, their counters and the translator\'s in the Prometheus text format, for node_exporter\'s textfile collector'
complete -c ila -n "__fish_ila_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c ila -n "__fish_ila_using_subcommand xlat" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c ila -n "__fish_ila_using_subcommand xlat" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c ila -n "__fish_ila_using_subcommand xlat" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c ila -n "__fish_ila_using_subcommand xlat" -l backend -d 'The implementation: kernel, bpf or auto' -r -f -a "auto\t'The kernel\'s where it has the generic netlink family "ila", else bpf'
kernel\t'The kernel\'s ILA module (generic netlink and LWT encap)'
bpf\t'ila\'s BPF translator (XDP/tc programs and pinned maps)'"
complete -c ila -n "__fish_ila_using_subcommand xlat" -s j -l json -d 'Output JSON'
complete -c ila -n "__fish_ila_using_subcommand xlat" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c ila -n "__fish_ila_using_subcommand xlat" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c ila -n "__fish_ila_using_subcommand xlat" -s d -l details -d 'Show details'
complete -c ila -n "__fish_ila_using_subcommand xlat" -s s -l stats -d 'Show statistics'
complete -c ila -n "__fish_ila_using_subcommand xlat" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c ila -n "__fish_ila_using_subcommand xlat" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c ila -n "__fish_ila_using_subcommand xlat" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ila -n "__fish_ila_using_subcommand route" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c ila -n "__fish_ila_using_subcommand route" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c ila -n "__fish_ila_using_subcommand route" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c ila -n "__fish_ila_using_subcommand route" -l backend -d 'The implementation: kernel, bpf or auto' -r -f -a "auto\t'The kernel\'s where it has the generic netlink family "ila", else bpf'
kernel\t'The kernel\'s ILA module (generic netlink and LWT encap)'
bpf\t'ila\'s BPF translator (XDP/tc programs and pinned maps)'"
complete -c ila -n "__fish_ila_using_subcommand route" -s j -l json -d 'Output JSON'
complete -c ila -n "__fish_ila_using_subcommand route" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c ila -n "__fish_ila_using_subcommand route" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c ila -n "__fish_ila_using_subcommand route" -s d -l details -d 'Show details'
complete -c ila -n "__fish_ila_using_subcommand route" -s s -l stats -d 'Show statistics'
complete -c ila -n "__fish_ila_using_subcommand route" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c ila -n "__fish_ila_using_subcommand route" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c ila -n "__fish_ila_using_subcommand route" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ila -n "__fish_ila_using_subcommand dataplane" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c ila -n "__fish_ila_using_subcommand dataplane" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c ila -n "__fish_ila_using_subcommand dataplane" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c ila -n "__fish_ila_using_subcommand dataplane" -l backend -d 'The implementation: kernel, bpf or auto' -r -f -a "auto\t'The kernel\'s where it has the generic netlink family "ila", else bpf'
kernel\t'The kernel\'s ILA module (generic netlink and LWT encap)'
bpf\t'ila\'s BPF translator (XDP/tc programs and pinned maps)'"
complete -c ila -n "__fish_ila_using_subcommand dataplane" -s j -l json -d 'Output JSON'
complete -c ila -n "__fish_ila_using_subcommand dataplane" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c ila -n "__fish_ila_using_subcommand dataplane" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c ila -n "__fish_ila_using_subcommand dataplane" -s d -l details -d 'Show details'
complete -c ila -n "__fish_ila_using_subcommand dataplane" -s s -l stats -d 'Show statistics'
complete -c ila -n "__fish_ila_using_subcommand dataplane" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c ila -n "__fish_ila_using_subcommand dataplane" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c ila -n "__fish_ila_using_subcommand dataplane" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ila -n "__fish_ila_using_subcommand metrics" -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c ila -n "__fish_ila_using_subcommand metrics" -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c ila -n "__fish_ila_using_subcommand metrics" -l wait -d 'Wait at most SECONDS for another invocation that holds the namespace\'s state (mproute\'s routes, ila\'s tables), then fail with exit 2 naming it (default 60; 0: do not wait)' -r
complete -c ila -n "__fish_ila_using_subcommand metrics" -l backend -d 'The implementation: kernel, bpf or auto' -r -f -a "auto\t'The kernel\'s where it has the generic netlink family "ila", else bpf'
kernel\t'The kernel\'s ILA module (generic netlink and LWT encap)'
bpf\t'ila\'s BPF translator (XDP/tc programs and pinned maps)'"
complete -c ila -n "__fish_ila_using_subcommand metrics" -s j -l json -d 'Output JSON'
complete -c ila -n "__fish_ila_using_subcommand metrics" -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c ila -n "__fish_ila_using_subcommand metrics" -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c ila -n "__fish_ila_using_subcommand metrics" -s d -l details -d 'Show details'
complete -c ila -n "__fish_ila_using_subcommand metrics" -s s -l stats -d 'Show statistics'
complete -c ila -n "__fish_ila_using_subcommand metrics" -l check -d 'Dry run: parse, resolve and compare with the kernel, report what each command (each batch line) would change, and change nothing. Exit 0 when every command could be applied'
complete -c ila -n "__fish_ila_using_subcommand metrics" -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c ila -n "__fish_ila_using_subcommand metrics" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ila -n "__fish_ila_using_subcommand help; and not __fish_seen_subcommand_from xlat route dataplane metrics help" -f -a "xlat" -d 'The receive side: mappings from a locator to another (ILA to SIR), as ip ila'
complete -c ila -n "__fish_ila_using_subcommand help; and not __fish_seen_subcommand_from xlat route dataplane metrics help" -f -a "route" -d 'The send side: routes that give SIR destinations their locator (SIR to ILA)'
complete -c ila -n "__fish_ila_using_subcommand help; and not __fish_seen_subcommand_from xlat route dataplane metrics help" -f -a "dataplane" -d 'The BPF translator on devices (bpf backend)'
complete -c ila -n "__fish_ila_using_subcommand help; and not __fish_seen_subcommand_from xlat route dataplane metrics help" -f -a "metrics" -d 'Print the mappings and routes, their counters and the translator\'s in the Prometheus text format, for node_exporter\'s textfile collector'
complete -c ila -n "__fish_ila_using_subcommand help; and not __fish_seen_subcommand_from xlat route dataplane metrics help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
