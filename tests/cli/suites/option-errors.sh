# Option errors name the option as the user wrote it, for every command and every option.
# The options come from each command's --help (and the commands from ckplan --help), so an
# option added later is covered without editing this file.

# printable ASCII only: getopt_long's code for a long-only option is not a character, and
# printed as one it showed as a garbage byte ("option '-\xec' needs a value")
printable() { ! printf '%s' "$1" | LC_ALL=C grep -q '[^[:print:]]'; }

commands=$("$bin" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
check_that "ckplan --help lists the six commands" test "$(printf '%s\n' $commands | wc -l)" -ge 6
for cmd in $commands; do
    help=$("$bin" "$cmd" --help)
    # "  --budget SIZE   ..." takes a value, "  --json   ..." does not, "-o, --output FILE" both
    valued=$(printf '%s\n' "$help" | sed -nE 's/^ +(-[a-z], )?--([a-z][a-z-]*) [A-Za-z].*/\2/p' | sort -u)
    flags=$(printf '%s\n' "$help" | sed -nE 's/^ +(-[a-z], )?--([a-z][a-z-]*)( {2,}.*)?$/\2/p' | sort -u)
    shorts=$(printf '%s\n' "$help" | sed -nE 's/^ +-([a-z]), --[a-z-]+ [A-Za-z].*/\1/p')
    check_that "$cmd --help lists options with values and flags" test -n "$valued" -a -n "$flags"
    for opt in $valued; do
        run "$cmd" "--$opt"
        check "$cmd --$opt without a value" 2 "option '--$opt' needs a value"
        check_that "$cmd --$opt without a value: message is printable" printable "$err"
    done
    for opt in $flags; do
        run "$cmd" "--$opt=yes"
        check "$cmd --$opt=yes" 2 "option '--$opt' takes no value"
        check_that "$cmd --$opt=yes: message is printable" printable "$err"
    done
    for opt in $shorts; do
        run "$cmd" "-$opt"
        check "$cmd -$opt without a value" 2 "option '-$opt' needs a value"
    done
    run "$cmd" --no-such-option=1
    check "$cmd: an unknown long option is named without its value" 2 "unknown option '--no-such-option';"
    run "$cmd" -Z
    check "$cmd: an unknown short option" 2 "unknown option '-Z'"
done

# an abbreviation is named as written, and one that fits several options says which
run plan "$data/chain10.json" --bud
check "an abbreviated option is named as written" 2 "option '--bud' needs a value"
run plan "$data/chain10.json" --s 1
check "an ambiguous abbreviation lists what it could be" 2 "option '--s' is ambiguous (--set, --seq, --sp, --slots, --svg)"
# a bad short option after a valid long one is still the short one
run report --csv -Zq
check "a short option's error after a long flag names the short option" 2 "unknown option '-Z'"
run report --runs=x -Zq
check "a short option's error after --opt=value names the short option" 2 "unknown option '-Z'"
