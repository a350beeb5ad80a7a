#!/usr/bin/env bash
# kconfig-check.sh <.config> <fragment>...: fail if any option requested by a
# fragment did not survive olddefconfig.
set -euo pipefail
cfg=$1; shift
bad=0
for frag in "$@"; do
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*) grep -qxF -- "$line" "$cfg" || { echo "kconfig-check: $frag asks for '$line' but .config has '$(grep -E "^(# )?${line%%=*}[= ]" "$cfg" || echo unset)'" >&2; bad=1; } ;;
		"# CONFIG_"*" is not set") o=${line#\# }; o=${o%% *}; grep -q "^$o=" "$cfg" && { echo "kconfig-check: $frag disables $o but .config enables it" >&2; bad=1; } ;;
		esac
	done < "$frag"
done
exit $bad
