#!/bin/sh
# function_lengths.sh - print "lines file:line name" for every function
# definition of the given C files, longest first; with -m MAX, print only
# those over MAX lines and exit 1 if there are any.
#
# Relies on the project's layout (clang-format, Linux style): a definition
# starts at column 0, its body opens with "{" alone on a line and closes with
# "}" alone on a line. A length counts the signature and both braces.
max=0
if [ "$1" = "-m" ]; then
    max=$2
    shift 2
fi
awk -v max="$max" '
FNR == 1 { start = 0; body = 0 }
!body && /^[A-Za-z_][A-Za-z0-9_ \t\*]*[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/ && !/;[ \t]*$/ {
    start = FNR
    name = $0
    sub(/[ \t]*\(.*/, "", name)
    sub(/.*[ \t\*]/, "", name)
}
!body && /;[ \t]*$/ && start && FNR == start { start = 0 }
!body && /^\{[ \t]*$/ && start { body = 1 }
body && /^\}[ \t]*$/ {
    lines = FNR - start + 1
    if (lines > max)
        printf "%5d %s:%d %s\n", lines, FILENAME, start, name
    body = 0
    start = 0
}
' "$@" | sort -rn | {
    over=0
    while IFS= read -r row; do
        echo "$row"
        over=1
    done
    [ "$max" -eq 0 ] || [ "$over" -eq 0 ]
}
