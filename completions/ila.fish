complete -c ila -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c ila -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c ila -s j -l json -d 'Output JSON'
complete -c ila -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c ila -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c ila -s d -l details -d 'Show details'
complete -c ila -s s -l stats -d 'Show statistics'
complete -c ila -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c ila -s h -l help -d 'Print help'
complete -c ila -s V -l version -d 'Print version'
