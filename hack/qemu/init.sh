#!/bin/busybox sh
# /init of the guest (embedded into the initramfs by hack/qemu). It prepares a minimal system,
# runs the harness's /ctl/run.sh with bash, and powers off. run.sh writes the test script's exit
# status to /ctl/status; if anything fails before that, the host sees no status and reports the
# console output instead.
bb=/bin/busybox

$bb mount -t proc proc /proc
$bb mount -t sysfs sysfs /sys
$bb mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
$bb mkdir -p /dev/pts /dev/shm
$bb mount -t devpts devpts /dev/pts
$bb mount -t tmpfs tmpfs /dev/shm
$bb mount -t tmpfs tmpfs /tmp
$bb mount -t tmpfs tmpfs /run
$bb ln -s /run /var/run
# `ip netns add` bind-mounts under /run/netns and wants a shared mount to propagate them.
$bb mount --make-rshared /

# busybox applets go last on PATH: the host's ip, bash, ping and iptables win.
$bb --install -s /bb
export PATH=/mnt/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/bb
export HOME=/root TERM=dumb

fail() {
	echo "tabby-qemu-init: $*"
	$bb poweroff -f
}

# modprobe (kmod) orders the modules by modules.dep; the kernel uses /sbin/modprobe too.
/usr/sbin/modprobe -a $($bb cat /etc/tabby-qemu/modules) || fail "loading modules failed"

opts=trans=virtio,version=9p2000.L,msize=262144
$bb mount -t 9p -o "$opts" tabbyctl /ctl || fail "mounting the control share failed"
if $bb grep -qx share /ctl/mounts 2>/dev/null; then
	$bb mount -t 9p -o "$opts" host0 /mnt || fail "mounting the shared directory failed"
fi

/usr/sbin/ip link set lo up
echo "tabby-qemu-init: ready, kernel $($bb uname -r)"
cd /mnt
/usr/bin/bash /ctl/run.sh </dev/null
$bb sync
$bb poweroff -f
