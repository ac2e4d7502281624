#!/bin/sh
# /init of the blkqos test guest (busybox). Prints one line per check:
#   BLKQOS-CHECK PASS|FAIL <name> [detail]
# and figures as BLKQOS-MEASURE <name> key=value..., then BLKQOS-DONE.
# Settings come from the kernel command line: blkqos.mode=psd (the
# patched kernel) or blkqos.mode=nopsd (CONFIG_CPU_LATENCY_LEASE=n);
# blkqos.only=hotpath skips the checks and only measures the hot path,
# blkqos.only=probe runs only blkqos probe (guest/probe.sh, on the table
# blkqos_test.idle= names),
# blkqos.only=lapse runs only the lapse checks, blkqos.only=nvme only
# the NVMe topology checks (guest/nvme.sh);
# blkqos.hotpath_ios=N sets its I/O count, blkqos.hotpath_reps=N its
# pairs of runs; blkqos.only=bench runs the
# benchmark matrix of bench/kernel, blkqos.bench_ios=N I/Os per point,
# blkqos.bench_lat_reps=N latency runs per point, blkqos.bench_reps=N runs
# of the second after the last I/O, blkqos.bench_spread=P the completion
# times' spread (+/- P per cent); blkqos.bench_part=bursts runs only the
# bursts (=db the database, =hotpath the hot path), blkqos.bench_bursts=B,B..:G,G.. their sizes and gaps (ms),
# blkqos.bench_shapes=local,cross the shapes of the bursts and database,
# blkqos.bench_dev=nvme the sweep on QEMU's NVMe (nvme_up);
# blkqos.stress_secs=N sets the stress run's guest seconds (default 20).

export PATH=/bin:/sbin:/usr/bin:/usr/sbin
[ -e /proc/self ] || mount -t proc proc /proc
# blkqos.init=systemd (the stock guest): systemd is PID 1, as on the
# machines blkqos-lease.service runs on, and runs this script again from
# blkqos-check.service. Its root is a tmpfs copy of this one, switched
# to as an initramfs hands over to a real root.
if [ $$ = 1 ] && grep -q 'blkqos\.init=systemd' /proc/cmdline; then
	mkdir /newroot
	mount -t tmpfs tmpfs /newroot
	for f in $(ls -A /); do
		[ "$f" = proc ] || [ "$f" = newroot ] || cp -a "/$f" /newroot/
	done
	mkdir /newroot/proc
	umount /proc
	exec switch_root /newroot /lib/systemd/systemd
fi
# under systemd, what it mounted already stays
mnt() { # type dir
	grep -q "^[^ ]* $2 " /proc/mounts || mount -t "$1" "$1" "$2"
}
mnt sysfs /sys
mnt devtmpfs /dev
mnt configfs /sys/kernel/config
mnt debugfs /sys/kernel/debug
mnt tmpfs /run
mnt tmpfs /tmp

MODE=$(sed -n 's/.*blkqos\.mode=\([a-z]*\).*/\1/p' /proc/cmdline)
ONLY=$(sed -n 's/.*blkqos\.only=\([a-z]*\).*/\1/p' /proc/cmdline)
HOTPATH_IOS=$(sed -n 's/.*blkqos\.hotpath_ios=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${HOTPATH_IOS:=20000}"
HOTPATH_REPS=$(sed -n 's/.*blkqos\.hotpath_reps=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${HOTPATH_REPS:=1}"
BENCH_IOS=$(sed -n 's/.*blkqos\.bench_ios=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${BENCH_IOS:=2000}"
BENCH_REPS=$(sed -n 's/.*blkqos\.bench_reps=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${BENCH_REPS:=5}"
BENCH_LAT_REPS=$(sed -n 's/.*blkqos\.bench_lat_reps=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${BENCH_LAT_REPS:=3}"
BENCH_SPREAD=$(sed -n 's/.*blkqos\.bench_spread=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${BENCH_SPREAD:=50}"
STRESS_SECS=$(sed -n 's/.*blkqos\.stress_secs=\([0-9]*\).*/\1/p' /proc/cmdline)
: "${STRESS_SECS:=20}"
IOS=64			# I/Os per idle-selection phase
SLOW_NS=1000000		# completion time that makes DEEP worth entering
CPUIDLE=/sys/devices/system/cpu/cpuidle
# the idle table (blkqos_test.idle=, the test driver's), its deepest state
# and C1's exit latency, which cpu_dma_latency and the static resume
# latency peers hold
IDLE=$(cat /sys/module/blkqos_test/parameters/idle 2>/dev/null || echo model)
DEEP=state$(($(ls -d /sys/devices/system/cpu/cpu0/cpuidle/state* | wc -l) - 1))
C1_EXIT_US=$(cat /sys/devices/system/cpu/cpu0/cpuidle/state1/latency 2>/dev/null || echo 2)
NULLB=/sys/kernel/config/nullb

# The checks by family, one file each (run installs them in /etc/guest):
# lib (helpers), abi (the knobs), lease (the kernel's lease), udev (blkqos
# on the kernel), bench (measurements), ulease (the lease from user space),
# nvme (the real NVMe topology: QEMU-emulated controllers, multipath, md,
# dm), probe (blkqos probe on the test driver's tables). What each boot
# runs is below, in one place.
for family in lib abi lease udev bench ulease nvme probe; do
	. /etc/guest/$family.sh
done
expect idle-driver "$(cat $CPUIDLE/current_driver)" = blkqos_test

# blkqos.only=NAME: one family of checks, then the end marker
only() {
	"$@"
	echo BLKQOS-DONE
	reboot -f
}
# The kselftest where the lapse timer is what wakes an idle CPU held
# shallow: CPU1 in full dynticks, its tick stopped while it idles (in the
# full boot the tick wakes it up for the lapse anyway, and the kselftest's
# last check passed there with the lapse timer armed 10 s late).
nohz_checks() {
	check_tick
	check_kselftest
}
bfix_checks() {
	check_knob_files
	check_auto_not_poll
}
race_checks() {
	mknull nb0 queue_mode=2 irqmode=2 completion_nsec=$SLOW_NS \
		submit_queues=2 || fail setup-nullb-mq
	check_knob_race
}

hotpath_checks() {
	clock_cost
	idle_entry
	hot_path 0
	hot_path 1
}
bench_checks() {
	# without its switch the PSD kernel's baseline would be PSD again
	[ "$MODE" != psdmodel ] || [ -e $PSD_ON ] || fail "bench-psd-switch $PSD_ON"
	# blkqos.bench_part=v4: one guest of bench/v4.py's matrix
	if grep -q 'blkqos\.bench_part=v4' /proc/cmdline; then
		bench_v4
		return
	fi
	# blkqos.bench_part=bursts: a guest of its own runs the bursts
	if grep -q 'blkqos\.bench_part=bursts' /proc/cmdline; then
		bench_bursts
		return
	fi
	if grep -q 'blkqos\.bench_part=db' /proc/cmdline; then
		bench_db
		return
	fi
	# a guest of its own per kernel measures the hot path (bench/run)
	if grep -q 'blkqos\.bench_part=hotpath' /proc/cmdline; then
		hot_path 0
		hot_path 1
		return
	fi
	[ "$MODE" = nopsd ] || bench_cross
}
case $ONLY in
nvme) only check_nvme ;;
storm) only check_udev_storm ;;
lease) only check_lease_trace ;;
bfix) only bfix_checks ;;
race) only race_checks ;;
lapse) only lapse_checks ;;
burst) only burst_checks ;;
tick) only check_tick ;;
nohz) only nohz_checks ;;
kunit) only check_kunit_modules ;;
kselftest) only check_kselftest ;;
renewals) only check_renewals ;;
ulease) only check_user_lease ;;
probe) only check_probe ;;
hotpath) only hotpath_checks ;;
bench) only bench_checks ;;
esac
check_knob_files
if [ "$MODE" = psd ]; then
	clock_cost
	check_kunit_modules
	for g in menu teo ladder; do
		check_governor $g
	done
	check_auto_not_poll
	lapse_checks
	burst_checks
	check_lease_trace
	check_strict_then_loose
	check_renewals
	check_menu_poll_override
	echo menu >$CPUIDLE/current_governor
	check_hotplug
	check_blkqos
	check_udevd
	check_nvme
	check_stress
fi
hot_path
rmnull nb0
echo BLKQOS-DONE
reboot -f
