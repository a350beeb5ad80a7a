#!/usr/bin/env bash
# Developer tool: turn the commits base..HEAD of $BUILD/linux back into the
# project's form: new files as real sources in their concern's folder, edits
# to existing files as one small patch per commit and folder, commit
# messages under msg/, and the 'series' file that orders them.
# prepare-tree.sh is its inverse. Run it after committing in the tree.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

folder_of() {
	case "$1" in
	arch/arm64/include/asm/kvm_asm.h|arch/arm64/kvm/hyp/nvhe/hyp-main.c|Documentation/*) echo hypercalls ;;
	arch/arm64/kvm/hyp/nvhe/*|arch/arm64/kvm/hyp/pgtable.c|arch/arm64/kvm/hyp/include/nvhe/*) echo nvhe ;;
	arch/arm64/include/asm/kvm_pgtable.h) echo nvhe ;;
	arch/arm64/kvm/hyp/vhe/*) echo vhe ;;
	tools/testing/selftests/*) echo selftests ;;
	*Kconfig*) echo Kconfig ;;
	*) echo host ;;
	esac
}

source_name() {
	case "$1" in
	arch/arm64/kvm/hyp/nvhe/*) echo "nvhe/${1#arch/arm64/kvm/hyp/nvhe/}" ;;
	arch/arm64/kvm/hyp/include/nvhe/*) echo "nvhe/include/${1#arch/arm64/kvm/hyp/include/nvhe/}" ;;
	arch/arm64/kvm/hyp/vhe/*) echo "vhe/${1#arch/arm64/kvm/hyp/vhe/}" ;;
	tools/testing/selftests/kvm/*) echo "selftests/kvm/${1#tools/testing/selftests/kvm/}" ;;
	Documentation/*) echo "hypercalls/doc/$(basename "$1")" ;;
	*) echo "$(folder_of "$1")/$(basename "$1")" ;;
	esac
}

git -C "$TREE" rev-parse -q --verify base >/dev/null || die "no tree at $TREE"
[ -z "$(git -C "$TREE" status --porcelain --untracked-files=no)" ] || die "tree has uncommitted changes"

# Drop what the last export generated.
find nvhe vhe hypercalls host selftests Kconfig -name '[0-9][0-9][0-9][0-9]-*.patch' -delete 2>/dev/null || true
rm -f msg/*.txt
: > series.new
cd "$TOP"
i=0
for c in $(git -C "$TREE" rev-list --reverse base..HEAD); do
	i=$((i + 1))
	n=$(printf %04d "$i")
	subj=$(git -C "$TREE" log -1 --format=%s "$c")
	slug=$(echo "$subj" | sed 's/^[^:]*: *//; s/^[^:]*: *//' | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '-' | sed 's/--*/-/g; s/^-//; s/-$//' | cut -c1-50)
	git -C "$TREE" log -1 --format=%B "$c" > "msg/$n-$slug.txt"
	echo "commit msg/$n-$slug.txt" >> series.new
	declare -A mod=()
	while read -r st path; do
		case "$st" in
		A)
			dst=$(source_name "$path")
			mkdir -p "$(dirname "$dst")"
			git -C "$TREE" show "$c:$path" > "$dst"
			echo "add $dst $path" >> series.new ;;
		M) mod[$(folder_of "$path")]+=" $path" ;;
		*) die "commit $c: unsupported change '$st $path'" ;;
		esac
	done < <(git -C "$TREE" diff-tree --no-commit-id -r --name-status "$c")
	for f in $(printf '%s\n' "${!mod[@]}" | sort); do
		p="$f/$n-$slug.patch"
		# shellcheck disable=SC2086
		git -C "$TREE" diff --no-color "$c^" "$c" -- ${mod[$f]} > "$p"
		echo "patch $p" >> series.new
	done
	unset mod
done
# A new file the last export added and this one does not (a file the
# series no longer creates) goes too, so that no stale copy stays behind.
if [ -f series ]; then
	for old in $(awk '$1 == "add" { print $2 }' series); do
		grep -qE "^add $old " series.new || { rm -f "$old"; echo "export-tree: removed $old (no longer in the series)"; }
	done
fi
mv series.new series
echo "export-tree: $i commits -> series"
# The tree is now exactly what the series describes.
ADOPT_TREE=1 "$TOP/scripts/prepare-tree.sh"
