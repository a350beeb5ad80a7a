#!/usr/bin/env bash
# kconfig-check.sh <.config> <fragment>...: fail if any option requested by
# the fragments (a later fragment overriding an earlier one) did not
# survive olddefconfig.
set -euo pipefail
cfg=$1; shift
declare -A want=() from=()
for frag in "$@"; do
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*) o=${line%%=*}; want[$o]=$line; from[$o]=$frag ;;
		"# CONFIG_"*" is not set") o=${line#\# }; o=${o%% *}; want[$o]="# $o is not set"; from[$o]=$frag ;;
		esac
	done < "$frag"
done
bad=0
for o in "${!want[@]}"; do
	w=${want[$o]}
	case "$w" in
	"# "*) grep -q "^$o=" "$cfg" && { echo "kconfig-check: ${from[$o]} disables $o but .config enables it" >&2; bad=1; } ;;
	*) grep -qxF -- "$w" "$cfg" || { echo "kconfig-check: ${from[$o]} asks for '$w' but .config has '$(grep -E "^(# )?$o[= ]" "$cfg" || echo unset)'" >&2; bad=1; } ;;
	esac
done
exit $bad
