# Sourced by the guest's /init (guest-init.sh). blkqos on the patched kernel: hotplug, apply/restore, a real udevd,
# an event storm, a stress run.

check_hotplug() {
	echo 60000 >"$(knob nb0 timeout_ms)"
	echo 10 >"$(knob nb0 limit_us)"
	fio_qd1 nb0 8 >/dev/null
	live=$(lease_of 1)
	expect "lease-live-before-offline $live" "${live%% *}" = limit_us=10
	ok=1
	echo 0 >/sys/devices/system/cpu/cpu1/online || ok=0
	echo 1 >/sys/devices/system/cpu/cpu1/online || ok=0
	expect cpu-offline-online-with-lease $ok = 1
	# a stale deadline would look live again after 2^31 jiffies offline
	back=$(lease_of 1)
	expect "lease-reset-by-offline-online $back" "${back%% *}" = limit_us=-1
	res=$(fio_qd1 nb0 8)
	expect io-after-hotplug -n "$res"
	echo -1 >"$(knob nb0 limit_us)"
	echo 3 >"$(knob nb0 timeout_ms)"
}

# blkqos itself against the guest's real sysfs
check_blkqos() {
	cat >/tmp/p.toml <<-EOF
	[[rule]]
	name = "nullb"
	match = { name = "nb0" }
	cpu_lat_limit_us = 20
	cpu_lat_timeout_ms = 7
	EOF
	blkqos apply /tmp/p.toml >/tmp/out 2>&1
	expect blkqos-apply $? = 0 -a "$(cat "$(knob nb0 limit_us)")" = 20 \
		-a "$(cat "$(knob nb0 timeout_ms)")" = 7
	blkqos verify /tmp/p.toml >>/tmp/out 2>&1
	expect blkqos-verify $? = 0
	echo 30 >"$(knob nb0 limit_us)"
	blkqos verify /tmp/p.toml >>/tmp/out 2>&1
	expect blkqos-verify-sees-drift $? -ne 0
	blkqos restore >>/tmp/out 2>&1
	expect blkqos-restore $? = 0 -a "$(cat "$(knob nb0 limit_us)")" = -1 \
		-a "$(cat "$(knob nb0 timeout_ms)")" = 3
	# the hotplug path, with the device path udev would give
	dp=$(readlink -f /sys/block/nb0)
	dp=${dp#/sys}
	ACTION=add DEVPATH=$dp blkqos udev /tmp/p.toml >>/tmp/out 2>&1
	expect blkqos-udev-add $? = 0 -a "$(cat "$(knob nb0 limit_us)")" = 20
	# no syslog socket yet, as in early boot: the kernel log has it
	dmesg | grep -q 'blkqos\[[0-9]*\]: nb0: rule "nullb": queue/cpu_lat_limit_us -1 -> 20'
	expect blkqos-udev-logs-to-kmsg $? = 0
	blkqos udev --action add --devpath "$dp/../../../.." /tmp/p.toml \
		>>/tmp/out 2>&1
	expect blkqos-udev-refuses-escape $? = 2
	# a remove while the disk is there (udevadm trigger -c remove) is
	# refused: its values and saved originals stay; the real removal is
	# checked with udevd (udevd-remove-forgets)
	ACTION=remove DEVPATH=$dp blkqos udev /tmp/p.toml >>/tmp/out 2>&1
	expect blkqos-udev-remove-present-refused $? = 2 \
		-a "$(cat "$(knob nb0 limit_us)")" = 20
	blkqos restore >>/tmp/out 2>&1
	expect blkqos-restore-after-udev $? = 0 -a "$(cat "$(knob nb0 limit_us)")" = -1
	grep -q . /tmp/out && sed 's/^/blkqos: /' /tmp/out
}

# A real systemd-udevd with the project's rule, and a syslogd that keeps
# blkqos's log lines in /tmp/messages.
start_udevd() { # check name
	mkdir -p /run/udev
	pidof syslogd >/dev/null || syslogd -O /tmp/messages || fail syslogd-start
	systemd-udevd --daemon --resolve-names=never 2>/tmp/udevd.err ||
		fail "$1" "$(cat /tmp/udevd.err)"
	udevadm settle -t 30
}

# null_blk disks PREFIX0 .. PREFIX<N-1> completing at once, and back
mknulls() { # prefix n
	i=0
	while [ $i -lt "$2" ]; do
		mknull "$1$i" queue_mode=2 irqmode=0 || fail "setup-$1$i"
		i=$((i + 1))
	done
}

rmnulls() { # prefix n
	i=0
	while [ $i -lt "$2" ]; do
		rmnull "$1$i"
		i=$((i + 1))
	done
}

# how many of the disks PREFIX* hold the limit (and the timeout, if given)
count_tuned() { # prefix limit_us [timeout_ms]
	c=0
	for d in /sys/block/"$1"*; do
		[ "$(cat $d/queue/cpu_lat_limit_us)" = "$2" ] || continue
		[ -z "${3:-}" ] || [ "$(cat $d/queue/cpu_lat_timeout_ms)" = "$3" ] ||
			continue
		c=$((c + 1))
	done
	echo $c
}

# The hotplug path end to end: a real systemd-udevd runs the project's
# rule, which runs blkqos udev for every disk that comes and goes.
check_udevd() {
	mkdir -p /etc/blkqos
	cat >/etc/blkqos/blkqos.toml <<-EOF
	[[rule]]
	name = "hotplug"
	match = { name = "ud*" }
	cpu_lat_limit_us = 15
	cpu_lat_timeout_ms = 9
	EOF
	start_udevd udevd-start
	n=50
	mknulls ud $n
	udevadm settle -t 120
	tuned=$(count_tuned ud 15 9)
	expect "udevd-add-tunes-all $tuned/$n" $tuned = $n
	blkqos verify /etc/blkqos/blkqos.toml >/dev/null 2>&1
	expect udevd-state-verifies $? = 0
	saved=$(grep -o '"block/ud[0-9]*/queue/cpu_lat_limit_us"' \
		/run/blkqos/state.json | sort -u | wc -l)
	expect "udevd-state-has-every-original $saved/$n" "$saved" = $n
	logged=$(grep -o 'blkqos\[[0-9]*\]: ud[0-9]*: rule "hotplug": queue/cpu_lat_limit_us -1 -> 15' \
		/tmp/messages | sed 's/.*: \(ud[0-9]*\): .*/\1/' | sort -u | wc -l)
	expect "udevd-add-logged-per-disk $logged/$n" "$logged" = $n

	echo 30 >/sys/block/ud3/queue/cpu_lat_limit_us
	udevadm trigger --action=change --subsystem-match=block
	udevadm settle -t 120
	expect udevd-change-reapplies "$(cat /sys/block/ud3/queue/cpu_lat_limit_us)" = 15

	rmnulls ud $n
	udevadm settle -t 120
	left=$(grep -c '"block/ud' /run/blkqos/state.json)
	expect "udevd-remove-forgets $left" "$left" = 0
	logged=$(grep -o 'blkqos\[[0-9]*\]: ud[0-9]*: removed; forgot 2 saved' \
		/tmp/messages | sed 's/.*: \(ud[0-9]*\): .*/\1/' | sort -u | wc -l)
	expect "udevd-remove-logged-per-disk $logged/$n" "$logged" = $n
	udevadm control --exit
}

# An event storm on the real udevd and the rule: 100 disks added at once,
# then 1000 change events over them (10 rounds of a trigger, not waited
# for). blkqos runs through event-time, which logs each event's wall time
# and exit status: every disk tuned, every event run and exited 0 (a run
# that gave up on the state lock would exit 3), and the figures.
secs_between() { # from to (seconds, from /proc/uptime)
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'
}

check_udev_storm() {
	mkdir -p /etc/blkqos
	cat >/etc/blkqos/blkqos.toml <<-EOF
	[[rule]]
	name = "storm"
	match = { name = "sm*" }
	cpu_lat_limit_us = 12
	cpu_lat_timeout_ms = 5
	EOF
	ln -sf /bin/event-time /usr/sbin/blkqos
	rm -f /tmp/event-times
	start_udevd udev-storm-start
	n=100
	t0=$(cut -d' ' -f1 /proc/uptime)
	mknulls sm $n
	udevadm settle -t 600
	t1=$(cut -d' ' -f1 /proc/uptime)
	tuned=$(count_tuned sm 12)
	expect "udev-storm-add-tunes-all $tuned/$n" $tuned = $n
	[ $tuned = $n ] || head -3 /tmp/event-times
	adds=$(awk '$3 == "add" && $4 ~ /sm[0-9]/' /tmp/event-times | wc -l)
	expect "udev-storm-add-events $adds/$n" "$adds" = $n
	add_max=$(awk '$3 == "add" { if ($1 > m) m = $1 } END { printf "%.1f", m / 1e6 }' /tmp/event-times)

	for d in /sys/block/sm*; do
		echo -1 >$d/queue/cpu_lat_limit_us
	done
	r=0
	while [ $r -lt 10 ]; do
		udevadm trigger --action=change --subsystem-match=block \
			--sysname-match='sm*'
		r=$((r + 1))
	done
	udevadm settle -t 600
	t2=$(cut -d' ' -f1 /proc/uptime)
	changes=$(awk '$3 == "change" && $4 ~ /sm[0-9]/' /tmp/event-times | wc -l)
	expect "udev-storm-change-events $changes/$((n * 10))" "$changes" = $((n * 10))
	bad=$(awk '$2 != 0' /tmp/event-times | wc -l)
	expect "udev-storm-every-run-exits-0 $bad" "$bad" = 0
	tuned=$(count_tuned sm 12)
	expect "udev-storm-change-retunes-all $tuned/$n" $tuned = $n
	blkqos verify /etc/blkqos/blkqos.toml >/dev/null 2>&1
	expect udev-storm-verifies $? = 0
	stats=$(awk '$3 == "change" { print $1 }' /tmp/event-times | sort -n | awk '
		{ v[NR] = $1 } END {
			printf "change_p50_ms=%.1f change_p99_ms=%.1f change_max_ms=%.1f",
				v[int(NR / 2) + 1] / 1e6, v[int(NR * 0.99) + 1] / 1e6, v[NR] / 1e6 }')
	measure "udev_storm disks=$n add_secs=$(secs_between "$t0" "$t1")" \
		"add_max_ms=$add_max change_events=$changes" \
		"change_secs=$(secs_between "$t1" "$t2") $stats"
	rmnulls sm $n
	udevadm settle -t 600
	udevadm control --exit
	ln -sf ../bin/blkqos /usr/sbin/blkqos
}

# Stress on the lock-debugging kernel: I/O on two devices while a loop
# writes valid and invalid values to both knobs, takes CPU1 offline and
# back, and switches governors; the console must stay clean (verdict in
# the harness) and the knobs must hold the last valid values written.
check_stress() {
	secs=$STRESS_SECS
	mknull st0 queue_mode=2 irqmode=2 completion_nsec=100000 \
		submit_queues=2 || fail setup-st0
	mknull st1 queue_mode=2 irqmode=1 submit_queues=2 || fail setup-st1
	for d in st0 st1; do
		fio --name=$d --filename=/dev/$d --rw=randread --bs=4k \
			--ioengine=libaio --iodepth=2 --direct=1 --time_based \
			--runtime=$((secs + 2)) --size=64m --thinktime=50 \
			--output-format=terse --terse-version=3 \
			>/tmp/$d.out 2>/tmp/$d.err &
	done
	end=$(($(cut -d. -f1 /proc/uptime) + secs))
	i=0 refused=0 accepted_bad=0 failed_good=0 cycles=0 switches=0
	while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
		i=$((i + 1))
		l0=$(((i * 7919) % 41 - 1)) l1=$(((i * 104729) % 41 - 1))
		t0=$((i % 9 + 1)) t1=$((i % 7 + 1))
		for bad in x 100001 -2 "1 2"; do
			if echo "$bad" >"$(knob st$((i % 2)) limit_us)" 2>/dev/null; then
				accepted_bad=$((accepted_bad + 1))
			else
				refused=$((refused + 1))
			fi
		done
		echo $l0 >"$(knob st0 limit_us)" || failed_good=$((failed_good + 1))
		echo $l1 >"$(knob st1 limit_us)" || failed_good=$((failed_good + 1))
		echo $t0 >"$(knob st0 timeout_ms)" || failed_good=$((failed_good + 1))
		echo $t1 >"$(knob st1 timeout_ms)" || failed_good=$((failed_good + 1))
		if [ $((i % 25)) = 0 ]; then
			echo 0 >/sys/devices/system/cpu/cpu1/online &&
				echo 1 >/sys/devices/system/cpu/cpu1/online &&
				cycles=$((cycles + 1))
		fi
		if [ $((i % 10)) = 0 ]; then
			[ $((i % 20)) = 0 ] && g=menu || g=teo
			echo $g >$CPUIDLE/current_governor && switches=$((switches + 1))
		fi
		sleep 0.02
	done
	wait
	echo menu >$CPUIDLE/current_governor
	ios=0
	for d in st0 st1; do
		n=$(awk -F';' '$1 == 3 { print $6 }' /tmp/$d.out)
		ios=$((ios + ${n:-0}))
	done
	expect "stress-knobs-hold-last-values" \
		"$(cat "$(knob st0 limit_us)") $(cat "$(knob st1 limit_us)")" = "$l0 $l1" -a \
		"$(cat "$(knob st0 timeout_ms)") $(cat "$(knob st1 timeout_ms)")" = "$t0 $t1"
	expect "stress-invalid-refused $refused/$((refused + accepted_bad))" $accepted_bad = 0
	expect "stress-valid-accepted" $failed_good = 0
	expect "stress-io-done $ios" $ios -gt 0
	expect "stress-hotplug-cycles $cycles" $cycles -gt 0
	measure "stress secs=$secs loops=$i knob_writes=$((i * 8)) invalid=$refused" \
		"hotplug_cycles=$cycles governor_switches=$switches ios=$ios"
	rmnull st0
	rmnull st1
}
