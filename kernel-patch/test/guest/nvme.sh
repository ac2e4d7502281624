# Sourced by the guest's /init (guest-init.sh): blkqos on QEMU's emulated NVMe (see run's
# nvme_qemu_args for the topology). check_nvme builds md RAID0 and
# dm-linear on top, prints the real sysfs layout as BLKQOS-SYSFS lines
# (the harness compares them with tests/data/guest-nvme-layout.txt, which
# tests/guest_layout.rs holds the fixture to), then checks blkqos list,
# apply, verify and restore on it, the lease renewed by I/O through the
# multipath head, and a real systemd-udevd with the project's rule as a
# controller and a shared namespace come and go.

NVME_A=0000:00:04.0	# namespaces 1 and 2: md0 (RAID0)
NVME_B=0000:00:05.0	# namespace 1, partition 1: dm-0 (linear)
NVME_C=0000:00:06.0	# subsystem blkqos-mp, with NVME_D: multipath
NVME_D=0000:00:07.0
NVME_E=0000:00:08.0	# removed and rescanned

# the controller (nvmeN) at a PCI address
nvme_ctrl_at() {
	ls "/sys/bus/pci/devices/$1/nvme" 2>/dev/null | head -1
}

# the block devices of a controller: namespaces, or hidden paths
nvme_disks_of() { # ctrl
	[ -n "$1" ] || return 0
	for d in /sys/class/nvme/"$1"/nvme*; do
		[ -e "$d/size" ] && echo "${d##*/}"
	done
}

# the head a hidden path nvmeScCnN serves: nvmeSnN
nvme_head_of_path() {
	echo "$1" | sed 's/^nvme\([0-9]*\)c[0-9]*n\([0-9]*\)$/nvme\1n\2/'
}

# wait (guest time is cheap here) until a condition holds
nvme_wait() { # tries condition-words...
	n=$1
	shift
	while [ "$n" -gt 0 ]; do
		"$@" && return 0
		sleep 0.05
		n=$((n - 1))
	done
	return 1
}

nvme_names() {
	NA=$(nvme_ctrl_at $NVME_A) NB=$(nvme_ctrl_at $NVME_B)
	NC=$(nvme_ctrl_at $NVME_C) ND=$(nvme_ctrl_at $NVME_D)
	NE=$(nvme_ctrl_at $NVME_E)
	set -- $(nvme_disks_of "$NA")
	A1=${1:-} A2=${2:-}
	B1=$(nvme_disks_of "$NB")
	PC=$(nvme_disks_of "$NC")
	PD=$(nvme_disks_of "$ND")
	E1=$(nvme_disks_of "$NE")
	H=
	[ -z "$PC" ] || H=$(nvme_head_of_path "$PC")
}

# Controller numbers follow the order of the probes, which the nvme driver
# runs asynchronously, and the shared subsystem takes the number of the
# controller whose reset work reaches it first: the names would change
# from boot to boot and with every change to the initramfs. A bind
# through sysfs probes at once, so binding the controllers again in PCI
# order, each after the one before has its disks, numbers them in that
# order. Namespace names follow the nsids: the harness's test patch
# scans a controller's namespaces one at a time.
nvme_rebind() {
	drv=/sys/bus/pci/drivers/nvme
	for a in $NVME_A $NVME_B $NVME_C $NVME_D $NVME_E; do
		[ ! -e $drv/$a ] || echo $a >$drv/unbind
	done
	for a in "$NVME_A 2" "$NVME_B 1" "$NVME_C 1" "$NVME_D 1" "$NVME_E 1"; do
		set -- $a
		echo $1 >$drv/bind
		nvme_wait 400 nvme_has_disks $1 $2 || return 1
	done
	nvme_wait 400 nvme_present && [ "$(cat /sys/block/$A1/nsid)" = 1 ]
}

# the controller at a PCI address is live with N disks
nvme_has_disks() { # pci n
	_c=$(nvme_ctrl_at $1)
	[ -n "$_c" ] && [ "$(cat /sys/class/nvme/$_c/state 2>/dev/null)" = live ] &&
		[ "$(nvme_disks_of $_c | wc -l)" = $2 ]
}

nvme_present() {
	nvme_names
	[ -n "$A2" ] && [ -n "$B1" ] && [ -n "$PC" ] && [ -n "$PD" ] &&
		[ -n "$E1" ] && [ -e "/sys/block/$H" ]
}

# An MBR with one Linux partition from sector 2048 to the end, written
# by hand (no partitioning tool needed).
nvme_partition() { # disk
	sectors=$(cat /sys/block/$1/size)
	len=$((sectors - 2048))
	le32() {
		printf "\\$(printf %03o $(($1 & 255)))\\$(printf %03o $((($1 >> 8) & 255)))"
		printf "\\$(printf %03o $((($1 >> 16) & 255)))\\$(printf %03o $((($1 >> 24) & 255)))"
	}
	{
		dd if=/dev/zero bs=446 count=1 2>/dev/null
		printf '\000\000\000\000\203\000\000\000'
		le32 2048
		le32 $len
		dd if=/dev/zero bs=48 count=1 2>/dev/null
		printf '\125\252'
	} >/tmp/mbr
	dd if=/tmp/mbr of=/dev/$1 bs=512 count=1 conv=fsync 2>/dev/null &&
		blockdev --rereadpt /dev/$1
}

nvme_setup() {
	nvme_partition "$B1" || fail nvme-setup-partition
	nvme_wait 100 [ -e "/sys/class/block/${B1}p1" ] ||
		fail nvme-setup-partition "(no ${B1}p1)"
	MDADM_NO_UDEV=1 mdadm --create /dev/md0 --run --quiet --level=0 \
		--raid-devices=2 --chunk=64 --metadata=1.2 --homehost=blkqos \
		--name=blkqos /dev/$A1 /dev/$A2 >/tmp/mdadm.out 2>&1 ||
		fail nvme-setup-md "$(cat /tmp/mdadm.out)"
	dmsetup --noudevsync create blkqos-lin --table \
		"0 $(cat /sys/class/block/${B1}p1/size) linear /dev/${B1}p1 0" \
		>/tmp/dmsetup.out 2>&1 || fail nvme-setup-dm "$(cat /tmp/dmsetup.out)"
	expect "nvme-stack-md0-over-$A1-$A2" -d /sys/block/md0/md -a \
		-L "/sys/block/md0/slaves/$A1" -a -L "/sys/block/md0/slaves/$A2"
	expect "nvme-stack-dm-0-over-${B1}p1" -d /sys/block/dm-0/dm -a \
		-L "/sys/block/dm-0/slaves/${B1}p1" -a \
		-L "/sys/class/block/${B1}p1/holders/dm-0"
}

# The sysfs layout blkqos reads (src/discover.rs, sysfs.rs, hotplug.rs,
# backend, idle.rs), one line per path, relative to /sys:
#   PATH -> TARGET    a link, as readlink(2) returns it
#   PATH/             a directory
#   PATH = 'VALUE'    an attribute (idle usage and time, and the live
#                     lease, as '*')
#   PATH absent       a path blkqos probes that is not there
# for the CPUs and for every disk of the topology (nvme*, md*, dm-*) and
# its partitions. tests/guest_layout.rs prints the same for the fixture.
nvme_layout_path() { # rel
	_lp=/sys/$1
	if [ -L "$_lp" ]; then
		echo "$1 -> $(readlink "$_lp")"
	elif [ -d "$_lp" ]; then
		echo "$1/"
	elif [ -e "$_lp" ]; then
		case $1 in
		*/cpuidle/state*/usage | */cpuidle/state*/time | */cpuidle/cpu_lat_lease_*)
			echo "$1 = '*'" ;;
		*) echo "$1 = '$(cat "$_lp")'" ;;
		esac
	else
		echo "$1 absent"
	fi
}

nvme_layout_lines() {
	nvme_layout_path devices/system/cpu/possible
	for c in /sys/devices/system/cpu/cpu[0-9]*; do
		c=devices/system/cpu/${c##*/}
		nvme_layout_path $c/power/pm_qos_resume_latency_us
		nvme_layout_path $c/cpuidle/cpu_lat_lease_limit_us
		nvme_layout_path $c/cpuidle/cpu_lat_lease_left_us
		for s in /sys/$c/cpuidle/state*; do
			for a in name latency residency disable usage time; do
				nvme_layout_path $c/cpuidle/${s##*/}/$a
			done
		done
	done
	for d in $(ls /sys/block); do
		case $d in nvme* | md* | dm-*) ;; *) continue ;; esac
		b=block/$d
		nvme_layout_path $b
		nvme_layout_path class/block/$d
		for a in subsystem device size removable hidden serial wwid md dm \
			mq slaves holders multipath queue/rotational \
			queue/cpu_lat_limit_us queue/cpu_lat_timeout_ms \
			cpu_lat_limit_us cpu_lat_timeout_ms device/model \
			device/serial device/wwid device/name device/vpd_pg80; do
			nvme_layout_path $b/$a
		done
		for q in $(ls /sys/$b/mq 2>/dev/null); do
			nvme_layout_path $b/mq/$q/cpu_list
		done
		for dir in slaves holders multipath; do
			for l in $(ls /sys/$b/$dir 2>/dev/null); do
				nvme_layout_path $b/$dir/$l
			done
		done
		# the nearest driver: the device's directory and its parents
		if [ -L /sys/$b/device ]; then
			dev=$(readlink -f /sys/$b/device)
			dev=${dev#/sys/}
			# a head's subsystem: its controllers and their paths
			case $dev in
			*/nvme-subsystem/*)
				for c in $(ls /sys/$dev | grep -x 'nvme[0-9]*'); do
					nvme_layout_path $b/device/$c
					for x in /sys/$dev/$c/nvme*c*n*; do
						[ -e "$x" ] && nvme_layout_path $b/device/$c/${x##*/}
					done
				done ;;
			esac
			while :; do
				nvme_layout_path $dev/driver
				[ -L /sys/$dev/driver ] && break
				dev=${dev%/*}
				case $dev in */*) ;; *) break ;; esac
			done
		fi
		for part in /sys/$b/*/partition; do
			[ -e "$part" ] || continue
			part=${part%/partition}
			part=${part##*/}
			nvme_layout_path class/block/$part
			nvme_layout_path class/block/$part/partition
			nvme_layout_path class/block/$part/subsystem
			nvme_layout_path $b/$part/holders
			for l in $(ls /sys/$b/$part/holders); do
				nvme_layout_path $b/$part/holders/$l
			done
		done
	done
}

nvme_layout() {
	nvme_layout_lines | LC_ALL=C sort -u | sed 's/^/BLKQOS-SYSFS /'
}

# `blkqos list --json`, one "device key value" line per field (arrays
# joined by commas, strings unquoted, objects left out)
nvme_list() {
	blkqos list --json 2>/tmp/nl.err | awk '
		/^  "devices": \[/ { on = 1; next }
		on && /^  \]/ { on = 0 }
		!on { next }
		arr && /^      \]/ { print name, key, val; arr = 0; next }
		arr { x = $0; gsub(/[ ",]/, "", x); val = val (val == "" ? "" : ",") x; next }
		obj && /^      }/ { obj = 0; next }
		obj { next }
		/^      "/ {
			line = $0; sub(/^ +"/, "", line)
			k = line; sub(/".*/, "", k)
			v = line; sub(/^[^"]*": /, "", v); sub(/,$/, "", v)
			if (v == "[") { arr = 1; key = k; val = ""; next }
			if (v == "{") { obj = 1; next }
			if (v == "[]") v = ""
			gsub(/"/, "", v)
			if (k == "name") name = v
			print name, k, v
		}' >/tmp/nl
}

nl_get() { # device key
	awk -v n="$1" -v k="$2" '$1 == n && $2 == k {
		$1 = ""; $2 = ""; sub(/^  /, ""); print; exit }' /tmp/nl
}

expect_field() { # device key want
	got=$(nl_get "$1" "$2")
	expect "nvme-list-$1-$2 $got" "$got" = "$3"
}

nvme_check_list() {
	nvme_list
	for d in $A1 $A2 $B1 $E1; do
		expect_field $d kind disk
		expect_field $d transport nvme
		expect_field $d driver nvme
		expect_field $d abi queue
		expect_field $d excluded null
		expect_field $d targets $d
	done
	expect_field $A1 pci $NVME_A
	expect_field $A1 model "QEMU NVMe Ctrl"
	expect_field $A1 serial BLKQOSA
	expect_field $A1 holders md0
	expect_field $B1 pci $NVME_B
	expect_field $E1 pci $NVME_E
	paths=$(printf '%s\n' $PC $PD | sort | tr '\n' , | sed 's/,$//')
	expect_field $H kind nvme-head
	expect_field $H transport nvme
	expect_field $H paths "$paths"
	expect_field $H targets "$paths"
	expect_field $H pci "$NVME_C,$NVME_D"
	expect_field $H driver nvme
	expect_field $H abi none
	expect_field $H excluded null
	expect_field $H serial BLKQOSMP
	for p in $PC $PD; do
		expect_field $p kind nvme-path
		expect_field $p transport nvme
		expect_field $p head $H
		expect_field $p abi queue
		expect_field $p excluded "hidden NVMe multipath path of $H"
	done
	expect_field md0 kind md
	expect_field md0 transport virtual
	expect_field md0 slaves "$A1,$A2"
	expect_field md0 targets "$A1,$A2"
	expect_field md0 abi none
	expect_field dm-0 kind dm
	expect_field dm-0 transport virtual
	expect_field dm-0 slaves "${B1}p1"
	expect_field dm-0 targets "$B1"
	expect_field dm-0 abi none
	listed=$(awk '$2 == "name" { print $1 }' /tmp/nl | grep -c -v -e '^ram' -e '^nb' -e '^ud')
	expect "nvme-list-count $listed" "$listed" = 9
	[ ! -s /tmp/nl.err ] || sed 's/^/blkqos list: /' /tmp/nl.err
}

# the knobs of a disk as "limit/timeout", or "none" without them
knobs_of() {
	if [ -e "$(knob "$1" limit_us)" ]; then
		echo "$(cat "$(knob "$1" limit_us)")/$(cat "$(knob "$1" timeout_ms)")"
	else
		echo none
	fi
}

nvme_profile() { # file nvme-timeout-ms
	cat >"$1" <<-EOF
	[[rule]]
	name = "md"
	match = { name = "md*" }
	cpu_lat_limit_us = 5
	cpu_lat_timeout_ms = 6

	[[rule]]
	name = "dm"
	match = { name = "dm-*" }
	cpu_lat_limit_us = 7
	cpu_lat_timeout_ms = 8

	[[rule]]
	name = "nvme"
	match = { transport = "nvme" }
	cpu_lat_limit_us = 10
	cpu_lat_timeout_ms = $2
	EOF
}

# apply sets the queues that do the I/O, the strictest request winning
# where two devices land on one queue (md's 5 us over the nvme rule's
# 10 us on its members, the longest timeout); the heads have no knobs
nvme_check_apply() {
	nvme_profile /tmp/nvme.toml 4
	blkqos apply /tmp/nvme.toml >/tmp/nvme-apply.out 2>&1
	expect "nvme-apply $?" $? = 0
	for d in $A1 $A2; do
		expect "nvme-apply-md-member-$d $(knobs_of $d)" "$(knobs_of $d)" = 5/6
	done
	expect "nvme-apply-dm-lower-$B1 $(knobs_of $B1)" "$(knobs_of $B1)" = 7/8
	for d in $PC $PD; do
		expect "nvme-apply-path-$d $(knobs_of $d)" "$(knobs_of $d)" = 10/4
	done
	expect "nvme-apply-plain-$E1 $(knobs_of $E1)" "$(knobs_of $E1)" = 10/4
	for d in $H md0 dm-0; do
		expect "nvme-apply-no-knobs-on-$d" "$(knobs_of $d)" = none -a \
			! -e /sys/block/$d/cpu_lat_limit_us
	done
	blkqos verify /tmp/nvme.toml >>/tmp/nvme-apply.out 2>&1
	expect "nvme-verify $?" $? = 0
	echo 20 >/sys/block/$PD/queue/cpu_lat_limit_us
	blkqos verify /tmp/nvme.toml >>/tmp/nvme-apply.out 2>&1
	expect "nvme-verify-sees-drift-on-path $?" $? = 1
	blkqos restore >>/tmp/nvme-apply.out 2>&1
	rc=$?
	left=
	for d in $A1 $A2 $B1 $PC $PD $E1; do
		[ "$(knobs_of $d)" = -1/3 ] || left="$left $d=$(knobs_of $d)"
	done
	expect "nvme-restore $rc${left:+ left:$left}" $rc = 0 -a -z "$left"
	grep -q . /tmp/nvme-apply.out && sed 's/^/blkqos: /' /tmp/nvme-apply.out
}

# fio on the head (one job on each CPU) renews the lease on the CPUs that
# submit to and complete on the paths' queues
nvme_check_lease() {
	nvme_profile /tmp/nvme-lease.toml 1000
	blkqos apply /tmp/nvme-lease.toml >/dev/null 2>&1 || fail nvme-lease-apply
	ios=200
	a0=$(renewals_of 0) a1=$(renewals_of 1)
	s0=$(cat /sys/block/$PC/stat /sys/block/$PD/stat | awk '{ n += $1 } END { print n }')
	fio --name=mp --filename=/dev/$H --rw=randread --bs=4k --ioengine=psync \
		--direct=1 --number_ios=$ios --size=32m --numjobs=2 \
		--cpus_allowed=0-1 --cpus_allowed_policy=split --norandommap \
		--randrepeat=1 --output-format=terse >/tmp/fio-mp.out 2>&1 ||
		sed 's/^/fio: /' /tmp/fio-mp.out
	l0=$(lease_of 0)
	l1=$(lease_of 1)
	g0=$(($(renewals_of 0) - a0)) g1=$(($(renewals_of 1) - a1))
	s1=$(cat /sys/block/$PC/stat /sys/block/$PD/stat | awk '{ n += $1 } END { print n }')
	reads=$((s1 - s0))
	measure "nvme-lease ios=$((2 * ios)) path_reads=$reads renewals=$g0,$g1 cpu0=[$l0] cpu1=[$l1]"
	expect "nvme-head-io-through-paths $reads/$((2 * ios))" $reads -ge $((2 * ios))
	expect "nvme-head-io-leases-cpu0 $l0" "${l0%% *}" = limit_us=10
	expect "nvme-head-io-leases-cpu1 $l1" "${l1%% *}" = limit_us=10
	if [ -r $TEST/renewals ]; then
		# each submitting CPU renews (a vector per CPU: dispatched and
		# completed there), at most once a tick per path's queue
		expect "nvme-head-io-renews cpu0=$g0 cpu1=$g1" $g0 -ge 1 -a $g1 -ge 1
	fi
	blkqos restore >/dev/null 2>&1 || fail nvme-lease-restore
	sleep 1.1	# let the 1 s lease lapse before the next checks
}

# state.json entries for a disk
saved_of() {
	grep -c "\"block/$1/" /run/blkqos/state.json 2>/dev/null
}

# hot-add and removal under a real systemd-udevd with the project's rule:
# a whole controller by PCI removal and rescan (what a hot-swap bay or
# `echo 1 >.../remove` does; no monitor needed), and a shared namespace of
# the multipath subsystem attached to and detached from both controllers
# by the NVMe Namespace Attachment command (the guest's nvme-attach)
nvme_check_udevd() {
	mkdir -p /etc/blkqos
	nvme_profile /etc/blkqos/blkqos.toml 4
	start_udevd nvme-udevd-start
	# what the boot unit does before any hotplug
	blkqos coldplug /etc/blkqos/blkqos.toml >/tmp/nvme-coldplug.out 2>&1
	expect "nvme-coldplug $?" $? = 0
	lines0=$(wc -l </tmp/messages)

	echo 1 >/sys/bus/pci/devices/$NVME_E/remove
	udevadm settle -t 60
	expect "nvme-pci-remove-$E1" ! -e /sys/block/$E1
	echo 1 >/sys/bus/pci/rescan
	nvme_wait 200 nvme_present
	udevadm settle -t 60
	expect "nvme-pci-rescan-udevd-tunes-$E1 $(knobs_of $E1)" "$(knobs_of $E1)" = 10/4
	expect "nvme-pci-rescan-state-saved-$E1 $(saved_of $E1)" "$(saved_of $E1)" = 2
	e1=$E1
	echo 1 >/sys/bus/pci/devices/$NVME_E/remove
	udevadm settle -t 60
	expect "nvme-pci-remove-udevd-forgets-$e1 $(saved_of $e1)" \
		! -e /sys/block/$e1 -a "$(saved_of $e1)" = 0
	tail -n +$((lines0 + 1)) /tmp/messages | grep -q "blkqos\[[0-9]*\]: $e1: removed; forgot 2 saved"
	expect "nvme-pci-remove-logged-$e1" $? = 0

	cc=$(cat /sys/class/nvme/$NC/cntlid) cd=$(cat /sys/class/nvme/$ND/cntlid)
	before=$(ls /sys/block)
	nvme-attach attach /dev/$NC 2 $cc $cd || fail nvme-ns-attach
	new_paths() {
		np=
		for d in $(ls /sys/block); do
			echo "$before" | grep -qx "$d" || np="$np $d"
		done
		set -- $np
		[ $# = 3 ]
	}
	nvme_wait 200 new_paths
	udevadm settle -t 60
	# A hidden path disk sends no uevent (genhd suppresses them for
	# GENHD_FL_HIDDEN), so udev runs blkqos only for the head, and a path
	# that comes up after the head (the other controller's) is not seen:
	# counted here, then covered as coldplug or an admin would, by a
	# change event on the head.
	set -- $np
	late=0
	for p in $*; do
		case $p in nvme*c*n*) [ "$(knobs_of $p)" = 10/4 ] || late=$((late + 1)) ;; esac
	done
	measure "nvme-ns-attach paths_untuned_after_head_add=$late"
	for p in $*; do
		case $p in nvme*c*n*) ;; *) udevadm trigger --action=change /sys/block/$p ;; esac
	done
	udevadm settle -t 60
	added=$*
	paths2= head2=
	for d in $added; do
		case $d in nvme*c*n*) paths2="$paths2 $d" ;; *) head2=$d ;; esac
	done
	expect "nvme-ns-attach-head-and-two-paths $added" -n "$head2" -a \
		"$(echo $paths2 | wc -w)" = 2
	for p in $paths2; do
		expect "nvme-ns-attach-udevd-tunes-path-$p $(knobs_of $p)" "$(knobs_of $p)" = 10/4
		expect "nvme-ns-attach-state-saved-$p $(saved_of $p)" "$(saved_of $p)" = 2
	done
	expect "nvme-ns-attach-no-knobs-on-head-$head2" "$(knobs_of $head2)" = none
	blkqos verify /etc/blkqos/blkqos.toml >/tmp/nvme-verify.out 2>&1
	expect "nvme-udevd-state-verifies $?" $? = 0
	nvme-attach detach /dev/$NC 2 $cc $cd || fail nvme-ns-detach
	gone() { for d in $added; do [ ! -e /sys/block/$d ] || return 1; done; }
	nvme_wait 200 gone
	udevadm settle -t 60
	left=0
	for p in $paths2 $head2; do
		left=$((left + $(saved_of $p)))
	done
	expect "nvme-ns-detach-udevd-forgets $left" "$left" = 0 -a ! -e /sys/block/$head2
	udevadm control --exit
	blkqos restore >/dev/null 2>&1
}

# Take the topology down: the lease kernel's lockdep (taught that reclaim
# waits for queue I/O, as later kernels are) reports nvme's shutdown at
# reboot, which frees the MSI-X vectors with the queues frozen; a removed
# controller is not frozen first.
nvme_teardown() {
	dmsetup --noudevsync remove blkqos-lin || fail nvme-teardown-dm
	MDADM_NO_UDEV=1 mdadm --stop /dev/md0 >/dev/null 2>&1 || fail nvme-teardown-md
	nvme_teardown_controllers
}

nvme_teardown_controllers() {
	for a in $NVME_A $NVME_B $NVME_C $NVME_D $NVME_E; do
		[ ! -e /sys/bus/pci/devices/$a ] || echo 1 >/sys/bus/pci/devices/$a/remove
	done
}

check_nvme() {
	t0=$(cut -d' ' -f1 /proc/uptime)
	if ! nvme_wait 400 nvme_present || ! nvme_rebind; then
		fail nvme-topology "(A=$NA:$A1,$A2 B=$NB:$B1 C=$NC:$PC D=$ND:$PD E=$NE:$E1 head=$H nsid($A1)=$(cat /sys/block/$A1/nsid 2>/dev/null))"
		ls -l /sys/block
		nvme_teardown_controllers
		return
	fi
	pass "nvme-topology A=$NA:$A1,$A2 B=$NB:$B1 C=$NC:$PC D=$ND:$PD E=$NE:$E1 head=$H"
	nvme_setup
	nvme_layout
	nvme_check_list
	nvme_check_apply
	nvme_check_lease
	nvme_check_udevd
	nvme_teardown
	t1=$(cut -d' ' -f1 /proc/uptime)
	measure "nvme guest_secs=$(echo "$t0 $t1" | awk '{ printf "%.2f", $2 - $1 }')"
}
