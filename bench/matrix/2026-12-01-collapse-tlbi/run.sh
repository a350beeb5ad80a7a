cd /work/main
for r in 1 2 3; do
 for cell in $(printf '%s\n' default:cortex-a76 old:cortex-a76 default:max old:max | shuf --random-source=<(yes $r)); do
  v=${cell%%:*}; c=${cell#*:}; [ $c = max ] && c="max,pauth-impdef=on"
  echo "boot $r $v $c $(date +%T)"
  CPU=$c INITRD=build/coll-initramfs.cpio scripts/boot.sh protected-nvhe $v > /tmp/coll/$v-${c%%,*}-$r.out 2>&1
  cp build/logs/$v-protected-nvhe-protected-nvhe.log /tmp/coll/$v-${c%%,*}-$r.log
 done
done
echo ALLDONE
