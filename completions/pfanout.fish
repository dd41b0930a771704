complete -c pfanout -s n -l netns -d 'Run in network namespace NAME (/run/netns/NAME), network namespace only' -r
complete -c pfanout -s b -l batch -d 'Read commands from FILE, one per line ("-" for standard input)' -r -F
complete -c pfanout -s j -l json -d 'Output JSON'
complete -c pfanout -s p -l pretty -d 'Pretty-print JSON (implies nothing without -j, as in iproute2)'
complete -c pfanout -l force -d 'In batch mode, go on after a failed line (the exit code still reports it)'
complete -c pfanout -s d -l details -d 'Show details'
complete -c pfanout -s s -l stats -d 'Show statistics'
complete -c pfanout -s v -l verbose -d 'Say more about what is done (to standard error)'
complete -c pfanout -s h -l help -d 'Print help'
complete -c pfanout -s V -l version -d 'Print version'
