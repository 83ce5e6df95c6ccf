#!/usr/bin/env bash
# Prepares what the qemu harness boots: Debian's own kernel (which, unlike the build machine's
# kernel, has ipip) and the subset of its modules the guest needs, with a modules.dep made for
# that subset. Cached under ${TABBY_CACHE:-$HOME/.cache/tabby}/qemu/; a second run costs nothing.
#
# Layout of the cache:
#   qemu/current                   name of the prepared kernel directory, e.g. linux-6.1.0-56-amd64
#   qemu/linux-KVER/vmlinuz
#   qemu/linux-KVER/lib/modules/KVER/...   module subset + modules.dep (depmod -b)
#   qemu/linux-KVER/modules.boot   modules the guest's /init loads at boot (modprobe resolves order)
#
# The harness (hack/qemu, Go) runs this script itself when the cache is missing, so `go test`
# works on a fresh CI machine; running it by hand first only moves the cost.
set -euo pipefail

CACHE=${TABBY_CACHE:-$HOME/.cache/tabby}
Q="$CACHE/qemu"
mkdir -p "$Q"

log() { printf '[qemu-prepare] %s\n' "$*" >&2; }

# Modules loaded at boot: the 9p share, the IPIP tunnel, and the links tests build.
BOOT_MODULES=(virtio_pci 9pnet_virtio 9p tunnel4 ip_tunnel ipip veth bridge dummy)

# Modules shipped in the guest so the kernel can load them on demand (iptables matches and
# targets, conntrack, NAT, nftables, ipset types): whole directories, plus their dependencies.
SHIP_DIRS=(net/ipv4 net/netfilter net/bridge net/9p fs/9p fs/fscache fs/netfs drivers/virtio)
SHIP_FILES=(drivers/net/veth.ko drivers/net/dummy.ko drivers/net/virtio_net.ko)

prepared() {
  [ -f "$Q/current" ] || return 1
  local d
  d="$Q/$(cat "$Q/current")"
  [ -f "$d/modules.boot" ] && { [ -f "$d/vmlinux" ] || [ -f "$d/vmlinux.unavailable" ]; } &&
    command -v qemu-system-x86_64 >/dev/null && command -v busybox >/dev/null
}

# Nothing to do when a kernel is prepared and the host tools exist.
if prepared; then exit 0; fi

# One preparer at a time: two test binaries starting together must not both unpack.
exec 9>"$Q/.lock"
flock 9
if prepared; then exit 0; fi

install_packages() {
  local missing=()
  command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
  # busybox-static, not busybox: the guest has no libc of its own for busybox to use.
  [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || missing+=(busybox-static)
  command -v cpio >/dev/null || missing+=(cpio)
  command -v depmod >/dev/null || missing+=(kmod)
  command -v xz >/dev/null || missing+=(xz-utils)
  if [ ${#missing[@]} -eq 0 ]; then return; fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    apt-get update >/dev/null
    apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

install_packages

pkg=${TABBY_QEMU_KERNEL_PKG:-}
if [ -z "$pkg" ]; then
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -n1)
  if [ -z "$pkg" ]; then
    apt-get update >/dev/null
    pkg=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -n1)
  fi
fi
if [ -z "$pkg" ]; then
  log "cannot tell which kernel package linux-image-amd64 depends on (apt-cache depends linux-image-amd64)"
  exit 1
fi
kver=${pkg#linux-image-}
dest="$Q/linux-$kver"

work=$(mktemp -d "$Q/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "downloading $pkg"
# apt-get download writes into the current directory; _apt cannot write into a root-owned mktemp
# dir, which apt reports as a harmless warning, so it is silenced.
(cd "$work" && apt-get download "$pkg" >/dev/null 2>&1) || (cd "$work" && apt-get download "$pkg" >/dev/null)
deb=$(ls "$work"/*.deb)
dpkg -x "$deb" "$work/root"
rm -f "$deb"

src="$work/root/lib/modules/$kver"
if [ ! -f "$work/root/boot/vmlinuz-$kver" ] || [ ! -d "$src/kernel" ]; then
  log "$pkg holds no boot/vmlinuz-$kver or lib/modules/$kver/kernel"
  exit 1
fi
# The .deb carries no modules.dep: the dependency closure below needs one for the full tree.
depmod -b "$work/root" "$kver"

stage="$work/stage"
mkdir -p "$stage/lib/modules/$kver"
wanted=()
for d in "${SHIP_DIRS[@]}"; do
  [ -d "$src/kernel/$d" ] || continue
  while IFS= read -r f; do wanted+=("$f"); done < <(find "$src/kernel/$d" -name '*.ko*')
done
for f in "${SHIP_FILES[@]}"; do [ -f "$src/kernel/$f" ] && wanted+=("$src/kernel/$f"); done

# Dependencies can live outside the shipped directories (lib/libcrc32c, crypto/...): take the
# closure as modprobe computes it against the full tree.
names=()
for f in "${wanted[@]}"; do n=${f##*/}; names+=("${n%%.ko*}"); done
names+=("${BOOT_MODULES[@]}")
modprobe -d "$work/root" -S "$kver" --show-depends -a "${names[@]}" 2>/dev/null |
  sed -n 's/^insmod \([^ ]*\).*/\1/p' | sort -u >"$work/closure"
while IFS= read -r f; do
  rel=${f#"$src"/}
  mkdir -p "$stage/lib/modules/$kver/$(dirname "$rel")"
  cp "$f" "$stage/lib/modules/$kver/$rel"
done <"$work/closure"
cp "$src"/modules.builtin* "$src"/modules.order "$stage/lib/modules/$kver/"
depmod -b "$stage" "$kver"

# Every boot module must resolve in the subset, or the guest would fail late and obscurely.
for m in "${BOOT_MODULES[@]}"; do
  if ! modprobe -d "$stage" -S "$kver" --show-depends "$m" >/dev/null 2>&1; then
    log "boot module $m is missing from the prepared subset"
    exit 1
  fi
done
printf '%s\n' "${BOOT_MODULES[@]}" >"$stage/modules.boot"
cp "$work/root/boot/vmlinuz-$kver" "$stage/vmlinuz"
# The uncompressed kernel boots through its PVH entry point (Debian sets CONFIG_PVH): qemu loads
# it directly, skipping the BIOS boot path and an xz decompression that takes seconds under TCG
# (measured: about 6 s instead of 16 s for a whole boot). The bzImage is kept as the fallback.
extract_vmlinux() {
  local off
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$stage/vmlinuz" | head -n1 | cut -d: -f1)
  [ -n "$off" ] || return 1
  # xz stops at the end of its stream and complains about the bytes after it; the ELF check
  # below is what tells success.
  tail -c +$((off + 1)) "$stage/vmlinuz" | xz -dc >"$stage/vmlinux" 2>/dev/null || true
  [ "$(head -c 4 "$stage/vmlinux" | od -An -c | tr -d ' ')" = '177ELF' ]
}
if ! extract_vmlinux; then
  rm -f "$stage/vmlinux"
  touch "$stage/vmlinux.unavailable"
  log "could not extract an uncompressed vmlinux; booting the bzImage (slower)"
fi
echo "$pkg" >"$stage/package"

rm -rf "$dest"
mv "$stage" "$dest"
echo "linux-$kver" >"$Q/current.tmp"
mv "$Q/current.tmp" "$Q/current"
log "prepared $pkg in $dest ($(wc -l <"$work/closure") modules)"
