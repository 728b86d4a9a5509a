# Output names (cli/files.c, ck_files_write_atomic): the temporary file is short and in the
# target's directory, so any valid name works; a symbolic link is written through to its
# target, as editors do (chains of links, dangling links); non-regular files are written
# in place; no temporary file (.ckplan-XXXXXX) is left.

mkdir -p paths/sub && cd paths || return
no_temps() { test -z "$(find . -name '.ckplan-*')"; }

# The longest names a directory entry may have (255 bytes): 250 characters here.
long=$(printf 'n%.0s' $(seq 245))
run plan "$data/chain10.json" --budget 1G -o "$long.json" --svg "$long.svg"
check "a 250-character output name is written" 0
check_that "... the plan under the 250-character name replays" replay "$long.json" "$data/chain10.json"
check_that "... and the chart is a whole SVG" python3 "$here/check_svg.py" "$long.svg"
run chain "$data/chain10.json" -o "sub/$long.json"
check "chain -o a 250-character name in a subdirectory" 0
check_that "... is the chain" test "$(json_get "sub/$long.json" '["format"]')" = ckplan-chain/1

# A link is written through: the target gets the plan, the link stays a link.
echo "old plan" > target.json
ln -s target.json link.json
run plan "$data/chain10.json" --budget 1G -o link.json
check "plan -o a symbolic link" 0
check_that "... keeps the link" test "$(readlink link.json)" = target.json
check_that "... and writes its target" replay target.json "$data/chain10.json"

# A dangling link: its target is created.
ln -s made.json dangling.json
run plan "$data/chain10.json" --budget 1G -o dangling.json
check "plan -o a dangling link" 0
check_that "... keeps the link" test "$(readlink dangling.json)" = made.json
check_that "... and creates its target" replay made.json "$data/chain10.json"

# A chain of links across directories, relative targets taken from each link's directory:
# a -> sub/b -> ../c (here) -> sub/end.json; the temporary file goes beside sub/end.json.
ln -s sub/b a
ln -s ../c sub/b
ln -s sub/end.json c
echo "old" > sub/end.json
run plan "$data/chain10.json" --budget 1G -o a --svg a.svg
check "plan -o the first of a chain of links" 0
check_that "... keeps every link" test "$(readlink a) $(readlink sub/b) $(readlink c)" = "sub/b ../c sub/end.json"
check_that "... and writes the file at its end" replay sub/end.json "$data/chain10.json"

# A loop of links is an error that says so, and writes nothing.
ln -s loop2 loop1
ln -s loop1 loop2
run plan "$data/chain10.json" --budget 1G -o loop1
check "a loop of links is refused" 1 "loop1" "symbolic links"

# Non-regular targets are written in place, through a link too: the device stays a device.
ln -s /dev/null to-null
run plan "$data/chain10.json" --budget 1G -o to-null
check "plan -o a link to /dev/null" 0
check_that "... keeps the link" test "$(readlink to-null)" = /dev/null
check_that "... and /dev/null stays a character device" test -c /dev/null

# New files get 0644 less the umask, whatever mode the temporary file was made with.
(umask 027 && "$bin" plan "$data/chain10.json" --budget 1G -o masked.json >/dev/null 2>&1)
check_that "a new output's mode is 0644 less the umask" test "$(stat -c %a masked.json)" = 640

check_that "no temporary file is left by any of these" no_temps
cd "$work" || return
