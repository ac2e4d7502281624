# Sourced by the guest's /init (guest-init.sh). blkqos lease, the lease from user space, on the stock kernel: its
# checks, its unit, the Ansible role.

# blkqos lease, the lease from user space, on the stock kernel
# (blkqos.mode=stock: the Debian tree with the test idle driver and
# cross-CPU null_blk, no series). The disk is the burst check's cross
# shape: CPU1 submits, the completion interrupt lands on CPU0 and comes
# back to CPU1 by IPI. The lease holds both CPUs (the disk's mq cpu_lists)
# through their pm_qos_resume_latency_us; CPU1 starts with an admin's
# 500 us, which must be back whenever no lease holds.
ULEASE_BURST="8 20000 5 pos"
ULEASE_ROUNDS=4
qos() { cat /sys/devices/system/cpu/cpu$1/power/pm_qos_resume_latency_us; }
qos_set() { echo "$2" >/sys/devices/system/cpu/cpu$1/power/pm_qos_resume_latency_us; }
qos_both() { echo "$(qos 0) $(qos 1)"; }
# both CPUs' values while the I/O runs: a 3 ms lease lapses whenever fio's
# reads stop for 3 ms (its CPU taken by what the check runs beside it, a
# tick being 4 ms) and is taken again at the next read, so one look may
# fall in such a gap; a few looks 10 ms apart
held_look() {
	k=0
	v=$(qos_both)
	while [ $k -lt 10 ] && [ "$v" != "10 10" ]; do
		sleep 0.01
		v=$(qos_both)
		k=$((k + 1))
	done
	echo "$v"
}
# context switches of a process: how often it woke
wakeups() { awk '/ctxt_switches/ { s += $2 } END { print s + 0 }' /proc/$1/status; }
# CPU time of a process, in microseconds (CONFIG_SCHEDSTATS)
cpu_us() { awk '{ print int($1 / 1000) }' /proc/$1/schedstat; }
# its user and system time, in clock ticks
ticks() { awk '{ print $14, $15 }' /proc/$1/stat; }
ulease_start() { # detect
	n0=$(grep -c "ul: CPUs 0-1 held at 10 us" /tmp/ulease.log)
	blkqos lease --detect "$1" /etc/blkqos/blkqos.toml 2>>/tmp/ulease.log &
	ul_pid=$!
	i=0
	while [ $i -lt 100 ] &&
		[ "$(grep -c "ul: CPUs 0-1 held at 10 us" /tmp/ulease.log)" = "$n0" ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ $i -lt 100 ] || fail "ulease-start-$1 (no lease within 10 s)"
}
ulease_stop() {
	kill -TERM "$ul_pid"
	wait "$ul_pid"
}
# leading reads of each burst slower than $1 us: "median max" over bursts
paid_exits() { # threshold file
	awk -v t="$1" '
		$1 == 0 { if (NR > 1) c[n++] = k; k = 0; lead = 1 }
		{ if (lead && $2 > t) k++; else lead = 0 }
		END {
			c[n++] = k
			for (i = 0; i < n; i++)
				for (j = i + 1; j < n; j++)
					if (c[j] < c[i]) { x = c[i]; c[i] = c[j]; c[j] = x }
			print c[int((n - 1) / 2)], c[n - 1]
		}' "$2"
}
# "off": deep allowed, nothing holds; "floor": the deep state disabled;
# "static": apply's fallback, both CPUs held at 10 us for good; "tp" and
# "stat": blkqos lease seeing I/O through the tracepoint or the stat
ulease_cfg_on() { # cfg
	case $1 in
	floor) for c in 0 1; do echo 1 >/sys/devices/system/cpu/cpu$c/cpuidle/state2/disable; done ;;
	static) qos_set 0 10; qos_set 1 10 ;;
	tp) ulease_start tracepoint ;;
	stat) ulease_start stat ;;
	esac
}
ulease_cfg_off() { # cfg
	case $1 in
	floor) for c in 0 1; do echo 0 >/sys/devices/system/cpu/cpu$c/cpuidle/state2/disable; done ;;
	static) qos_set 0 0; qos_set 1 500 ;;
	tp | stat) ulease_stop ;;
	esac
}
# deep time of CPU0 and CPU1 (ms) over $1 seconds of sleep, and CPU0's
# deep entries
idle_deep() {
	local a0 a1 b0 b1
	a0=$(idle-snap 0)
	a1=$(idle-snap 1)
	sleep "$1"
	b0=$(idle-snap 0)
	b1=$(idle-snap 1)
	echo $(($(delta "$a0" "$b0" 6) / 1000)) $(($(delta "$a1" "$b1" 6) / 1000)) \
		$(delta "$a0" "$b0" 3)
}
# reads on ul from CPU1 for $1 seconds, in the background ($f)
ul_io() {
	fio --name=ul --filename=/dev/ul --rw=randread --bs=4k --direct=1 \
		--ioengine=psync --cpus_allowed=1 --time_based --runtime="$1" \
		--output-format=terse >/dev/null 2>&1 &
	f=$!
}
unit_state() { systemctl show -p "$1" --value blkqos-lease.service; }
unit_wait() { # property value [tenths of a second]
	i=0
	while [ $i -lt "${3:-100}" ] && [ "$(unit_state "$1")" != "$2" ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
# blkqos-lease.service from its file, under systemd: its ExecCondition lets
# it run on a kernel without the knobs, its sandbox leaves it the
# tracepoint, the CPUs' values and its state; after a SIGKILL its stop
# step puts every value back before the restart; a bad profile on reload
# is kept out
check_lease_unit() {
	expect "ulease-unit-under-systemd" -d /run/systemd/system
	[ -d /run/systemd/system ] || return
	systemctl start blkqos-lease.service
	unit_wait ActiveState active
	i=0
	while [ $i -lt 100 ] && ! grep -q "ul: CPUs 0-1 held at 10 us" /run/ulease-unit.log; do
		sleep 0.1
		i=$((i + 1))
	done
	expect "ulease-unit-starts $(unit_state ActiveState)/$(unit_state SubState)" \
		"$(unit_state SubState)" = running -a $i -lt 100
	expect "ulease-unit-sandbox-leaves-the-tracepoint" \
		-n "$(grep 'through the block:block_rq_issue tracepoint' /run/ulease-unit.log)"
	ul_io 2
	sleep 1
	held=$(held_look)
	systemctl kill -s KILL blkqos-lease.service
	# stop-post runs ExecStopPost; auto-restart then waits RestartSec (1 s)
	# before the next start, whose own put-back must not be what is seen
	i=0
	while [ $i -lt 200 ] && [ "$(unit_state SubState)" != auto-restart ]; do
		sleep 0.02
		i=$((i + 1))
	done
	back=$(qos_both)
	sub=$(unit_state SubState)
	wait $f
	expect "ulease-unit-holds-during-io $held" "$held" = "10 10"
	expect "ulease-unit-stop-step-puts-back-after-sigkill $back ($sub)" \
		"$back" = "0 500" -a "$sub" = auto-restart
	unit_wait SubState running
	expect "ulease-unit-restarts-after-sigkill $(unit_state NRestarts)" \
		"$(unit_state SubState)" = running -a "$(unit_state NRestarts)" = 1
	echo 'cpu_lat_limit_us = [' >/etc/blkqos/blkqos.toml
	systemctl reload blkqos-lease.service
	sleep 1
	expect "ulease-unit-reload-keeps-the-old-profile $(unit_state SubState)" \
		"$(unit_state SubState)" = running \
		-a -n "$(grep 'keeping the profile read before' /run/ulease-unit.log)"
	cp /tmp/ul-good.toml /etc/blkqos/blkqos.toml
	systemctl stop blkqos-lease.service
	expect "ulease-unit-stop-puts-back $(qos_both)" "$(qos_both)" = "0 500" \
		-a -z "$(grep -o pm_qos_resume_latency_us /run/blkqos/state.json)"
	sed 's/^/blkqos-lease.service: /' /run/ulease-unit.log | tail -n 20
}
# The Ansible role on the stock kernel, run by the guest on itself as on a
# managed host (connection local, ansible-core from the second archive):
# blkqos_lease=auto installs, enables and starts blkqos-lease.service,
# which holds the CPUs during I/O; a second run changes nothing;
# blkqos_state=restored stops and disables it with every value back.
role_run() { # name [ansible-playbook options]
	local name=$1 rc=0
	shift
	cat >/tmp/role.yml <<-'EOF2'
	- name: blkqos on this guest, as on a managed host
	  hosts: all
	  gather_facts: false
	  vars:
	    blkqos_binary_src: /usr/bin/blkqos
	    blkqos_binary: /usr/local/sbin/blkqos
	    blkqos_profile_src: /tmp/ul-good.toml
	  roles:
	    - role: blkqos.blkqos.blkqos
	EOF2
	HOME=/tmp LC_ALL=C.UTF-8 ANSIBLE_NOCOLOR=1 \
		ANSIBLE_COLLECTIONS_PATH=/usr/share/blkqos-ansible/collections \
		ansible-playbook -i localhost, -c local \
		-e ansible_python_interpreter=/usr/bin/python3 -vvvvv "$@" /tmp/role.yml \
		>/tmp/role-$name.log 2>&1 || rc=$?
	[ $rc = 0 ] || grep -a -v '^ *$' /tmp/role-$name.log | grep -a -i -A3 'looking for\|fatal\|error' |
		tail -n 60 | sed "s/^/role $name: /"
	recap=$(sed -n 's/^localhost *: //p' /tmp/role-$name.log | tr -s ' ')
	return $rc
}
check_lease_role() {
	[ -d /run/systemd/system ] || return
	mkdir -p /dev/shm
	grep -q ' /dev/shm ' /proc/mounts || mount -t tmpfs shm /dev/shm
	# what the unit's checks left: stopped, disabled, the harness's file
	systemctl stop blkqos-lease.service
	systemctl disable blkqos-lease.service >/dev/null 2>&1
	expect "ulease-role-unit-stopped-before $(unit_state ActiveState)" \
		"$(unit_state ActiveState)" = inactive
	: >/run/ulease-unit.log
	s0=$(date +%s)
	role_run present
	rc=$?
	measure "ulease-role run=present guest_secs=$(($(date +%s) - s0)) $recap"
	expect "ulease-role-runs rc=$rc" $rc = 0
	unit_wait ActiveState active
	pid=$(unit_state MainPID)
	exe=$(readlink /proc/$pid/exe)
	expect "ulease-role-starts-the-unit $(systemctl is-enabled blkqos-lease.service) $(unit_state SubState) $exe" \
		"$(systemctl is-enabled blkqos-lease.service)" = enabled \
		-a "$(unit_state SubState)" = running -a "$exe" = /usr/local/sbin/blkqos
	i=0
	while [ $i -lt 100 ] && ! grep -q "ul: CPUs 0-1 held at 10 us" /run/ulease-unit.log; do
		sleep 0.1
		i=$((i + 1))
	done
	ul_io 2
	sleep 1
	held=$(held_look)
	wait $f
	sleep 0.5
	expect "ulease-role-unit-holds-during-io $held then $(qos_both)" \
		$i -lt 100 -a "$held" = "10 10" -a "$(qos_both)" = "0 500"
	role_run again
	rc=$?
	expect "ulease-role-second-run-changes-nothing rc=$rc $recap" \
		$rc = 0 -a -n "$(echo "$recap" | grep ' changed=0 .* failed=0 ')" \
		-a "$(unit_state MainPID)" = "$pid"
	role_run restored -e blkqos_state=restored
	rc=$?
	ul_io 1
	sleep 0.5
	during=$(qos_both)
	wait $f
	expect "ulease-role-restored-stops-the-unit rc=$rc $(systemctl is-enabled blkqos-lease.service) $(unit_state ActiveState) $during" \
		$rc = 0 -a "$(systemctl is-enabled blkqos-lease.service)" = disabled \
		-a "$(unit_state ActiveState)" = inactive -a "$during" = "0 500" \
		-a -f /run/blkqos/state.json \
		-a -z "$(grep -o pm_qos_resume_latency_us /run/blkqos/state.json)"
	sed 's/^/blkqos-lease.service (role): /' /run/ulease-unit.log | tail -n 10
	# the same play on a kernel with the knobs (a fake tree that has
	# them, which the unit's ExecCondition reads too: not in its private
	# /tmp): the unit is enabled for a later boot but not started
	# (test_role.py runs the lease unit's tasks in check mode only). No
	# second run here (it cost the cold CI 130 CPU seconds): the second
	# run above shows the role idempotent with the lease unit, and
	# test_role.py's test_apply_then_idempotent with the knobs.
	mkfixture /run/knobsys zoo queue >/dev/null
	role_run knobs -e blkqos_sysfs=/run/knobsys -e blkqos_state_dir=/run/blkqos-knobs
	rc=$?
	expect "ulease-role-kernel-lease-enables-without-starting rc=$rc $(systemctl is-enabled blkqos-lease.service) $(unit_state ActiveState) $recap" \
		$rc = 0 -a "$(systemctl is-enabled blkqos-lease.service)" = enabled \
		-a "$(unit_state ActiveState)" = inactive \
		-a -n "$(echo "$recap" | grep ' failed=0 ')"
}
check_user_lease() {
	mknull ul queue_mode=2 irqmode=2 completion_nsec=200000 submit_queues=2 \
		complete_cpu=1 irq_cpu=0 || fail setup-ul
	echo 2 >/sys/block/ul/queue/rq_affinity
	expect "ulease-stock-kernel-has-no-knobs" ! -e /sys/block/ul/queue/cpu_lat_limit_us \
		-a ! -e /sys/devices/system/cpu/cpu0/cpuidle/cpu_lat_lease_limit_us
	mkdir -p /etc/blkqos
	cat >/etc/blkqos/blkqos.toml <<-EOF2
	[[rule]]
	name = "ul"
	match = { name = "ul*" }
	cpu_lat_limit_us = 10
	cpu_lat_timeout_ms = 3
	EOF2
	cp /etc/blkqos/blkqos.toml /tmp/ul-good.toml
	qos_set 1 500
	# udevd with the project's rule runs beside the lease, as installed
	start_udevd ulease-udevd-start
	: >/tmp/ulease.log

	# with the disk idle: the admin's value stays, the process sleeps
	# and both CPUs' deep time is what it is with no process at all
	set -- $(idle_deep 10)
	off_deep="$1 $2"
	ulease_start auto
	expect "ulease-auto-picks-tracepoint" -n "$(grep 'through the block:block_rq_issue tracepoint' /tmp/ulease.log)"
	# counted from when the start is over: the originals in force and no
	# wake-up for half a second (one CI run saw 3 wake-ups and 2.5 ms of
	# CPU in this window where every other run saw none; what they were
	# is not known: the wake-ups let pass here are measured, and a
	# failure prints the kinds of switch and the lease's log)
	k=0
	while [ $k -lt 50 ] && [ "$(qos_both)" != "0 500" ]; do
		sleep 0.1
		k=$((k + 1))
	done
	k=0
	w0=$(wakeups $ul_pid)
	ws=$w0
	while [ $k -lt 10 ]; do
		sleep 0.5
		[ "$(wakeups $ul_pid)" != "$w0" ] || break
		w0=$(wakeups $ul_pid)
		k=$((k + 1))
	done
	u0=$(cpu_us $ul_pid)
	set -- $(idle_deep 10)
	w1=$(wakeups $ul_pid)
	u1=$(cpu_us $ul_pid)
	measure "ulease-idle settle_looks=$k settle_wakeups=$((w0 - ws)) secs=10 wakeups=$((w1 - w0)) cpu_us=$((u1 - u0)) cpu0_deep_entries=$3 deep_ms=$1,$2 off_deep_ms=${off_deep% *},${off_deep#* }"
	expect "ulease-idle-does-not-wake wakeups=$((w1 - w0))" $((w1 - w0)) -le 2 || {
		grep ctxt_switches /proc/$ul_pid/status
		tail -20 /tmp/ulease.log | sed 's/^/ulease.log: /'
	}
	expect "ulease-idle-deep-as-without-it deep_ms=$(($1 + $2)) off=$((${off_deep% *} + ${off_deep#* }))" \
		$((($1 + $2) * 100)) -ge $(((${off_deep% *} + ${off_deep#* }) * 99))
	expect "ulease-idle-leaves-the-originals $(qos_both)" "$(qos_both)" = "0 500"

	# during I/O both CPUs are held; after it, the originals come back
	ul_io 4
	sleep 1
	held=$(held_look)
	# status and metrics show it, the mechanism named. A 3 ms lease
	# lapses whenever fio's reads stop for 3 ms and is taken again at the
	# next, so a snapshot may fall in such a gap: on CPU0, away from
	# fio's, and a few looks, each status and metrics together
	n=0
	st=0 mt=0
	while [ $n -lt 8 ] && [ "$st$mt" != 22 ]; do
		st=$(taskset -c 0 blkqos status --json 2>/dev/null | tr -d ' \n' |
			grep -o '"user_lease":{"mechanism":"blkqoslease","pid":[0-9]*,"detect":"tracepoint","held":true,"limit_us":10,"timeout_ms":3' |
			wc -l)
		mt=$(taskset -c 0 blkqos metrics 2>/dev/null | grep -c '^blkqos_cpu_user_lease_held{cpu="[01]"} 1$')
		n=$((n + 1))
	done
	# someone else writes CPU0's value while the lease holds it
	qos_set 0 20
	wait $f
	sleep 0.1
	expect "ulease-holds-both-cpus-during-io $held" "$held" = "10 10"
	expect "ulease-status-and-metrics-show-it status=$st metrics=$mt looks=$n" "$st" = 2 -a "$mt" = 2 ||
		tail -20 /tmp/ulease.log | sed 's/^/ulease.log: /'
	expect "ulease-lapse-puts-back-and-keeps-a-later-value $(qos_both)" "$(qos_both)" = "20 500"
	# reported when the lease lets go of CPU0, a timeout after the last
	# read on either CPU: under a loaded host that came more than 0.1 s
	# after fio's end (a CI run), so look for up to 5 s
	n=0 seen=
	until [ -n "$seen" ] || [ $n -ge 50 ]; do
		seen=$(grep 'cpu0: pm_qos_resume_latency_us was changed to "20" by someone else' /tmp/ulease.log)
		[ -n "$seen" ] || sleep 0.1
		n=$((n + 1))
	done
	expect "ulease-reports-a-value-changed-under-it looks=$n" -n "$seen" ||
		tail -20 /tmp/ulease.log | sed 's/^/ulease.log: /'
	qos_set 0 0

	# a disk that comes and goes, through udev
	mknull ul2 queue_mode=2 irqmode=0 submit_queues=2 || fail setup-ul2
	udevadm settle -t 30
	sleep 0.5
	expect "ulease-follows-a-new-disk" -n "$(grep 'ul2: CPUs 0-1 held at 10 us' /tmp/ulease.log)"
	rmnull ul2
	udevadm settle -t 30
	sleep 0.5
	expect "ulease-follows-a-removed-disk" -n "$(grep 'ul2: no longer leased' /tmp/ulease.log)"

	# SIGHUP with a bad profile keeps the one read before
	echo 'cpu_lat_limit_us = [' >/etc/blkqos/blkqos.toml
	kill -HUP $ul_pid
	sleep 0.5
	expect "ulease-bad-profile-on-sighup-keeps-the-old" -d /proc/$ul_pid \
		-a -n "$(grep 'keeping the profile read before' /tmp/ulease.log)"
	cp /tmp/ul-good.toml /etc/blkqos/blkqos.toml
	ulease_stop
	expect "ulease-sigterm-puts-back $(qos_both)" "$(qos_both)" = "0 500"

	# SIGKILL while the lease holds: the values stay until the unit's
	# stop step (ExecStopPost) or the next start puts them back
	for next in stop-step start; do
		ulease_start tracepoint
		ul_io 2
		sleep 1
		kill -KILL $ul_pid
		wait $ul_pid 2>/dev/null
		wait $f
		expect "ulease-sigkill-leaves-cpus-held-$next $(qos_both)" "$(qos_both)" = "10 10"
		if [ $next = stop-step ]; then
			blkqos lease --put-back /etc/blkqos/blkqos.toml 2>>/tmp/ulease.log
			expect "ulease-stop-step-puts-back $(qos_both)" $? = 0 -a "$(qos_both)" = "0 500"
		else
			ulease_start tracepoint
			expect "ulease-next-start-puts-back $(qos_both)" "$(qos_both)" = "0 500"
			ulease_stop
		fi
		expect "ulease-state-has-no-leases-left-$next" \
			-z "$(grep -o pm_qos_resume_latency_us /run/blkqos/state.json)"
	done

	# a CPU that comes online after the start gets its events: CPU1
	# offline at the start, online again, its I/O starts the lease
	echo 0 >/sys/devices/system/cpu/cpu1/online
	ulease_start tracepoint
	echo 1 >/sys/devices/system/cpu/cpu1/online
	udevadm settle -t 30
	sleep 0.5
	ul_io 1
	sleep 0.5
	held=$(held_look)
	wait $f
	ulease_stop
	expect "ulease-cpu-online-later-is-watched $held" "$held" = "10 10"

	check_lease_unit

	# bursts after idle gaps, the configurations in turns
	for cfg in off floor static tp stat; do
		rm -f /tmp/ub-$cfg /tmp/ub-use-$cfg
	done
	for round in $(seq $ULEASE_ROUNDS); do
		for cfg in off floor static tp stat; do
			ulease_cfg_on $cfg
			pre=$(idle-snap 0)
			pre1=$(idle-snap 1)
			c0=0 u0=0
			[ $cfg != tp -a $cfg != stat ] || { c0=$(wakeups $ul_pid); u0=$(cpu_us $ul_pid); }
			idle-watch burst /dev/ul 1 $ULEASE_BURST >>/tmp/ub-$cfg
			c1=0 u1=0
			[ $cfg != tp -a $cfg != stat ] || { c1=$(wakeups $ul_pid); u1=$(cpu_us $ul_pid); }
			post=$(idle-snap 0)
			post1=$(idle-snap 1)
			# deep entries and deep time (us), idle time, on CPU0 and
			# CPU1; the process's wake-ups and CPU time
			echo $(delta "$pre" "$post" 3) $(delta "$pre" "$post" 6) \
				$(($(delta "$pre" "$post" 4) + $(delta "$pre" "$post" 5) + $(delta "$pre" "$post" 6))) \
				$(delta "$pre1" "$post1" 3) $(delta "$pre1" "$post1" 6) \
				$(($(delta "$pre1" "$post1" 4) + $(delta "$pre1" "$post1" 5) + $(delta "$pre1" "$post1" 6))) \
				$((c1 - c0)) $((u1 - u0)) >>/tmp/ub-use-$cfg
			ulease_cfg_off $cfg
			[ "$(qos_both)" = "0 500" ] || fail "ulease-burst-$cfg-puts-back $(qos_both)"
		done
	done
	floor_rest=$(awk '$1 > 0 { print $2 }' /tmp/ub-floor | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	for cfg in off floor static tp stat; do
		awk '$1 == 0 { print "first", $2 } $1 > 0 { print "rest", $2 }' /tmp/ub-$cfg >/tmp/ub-raw
		r=$(burst_summary /tmp/ub-raw)
		set -- $(paid_exits $((floor_rest + 75)) /tmp/ub-$cfg)
		paid="paid_exit_p50=$1 paid_exit_max=$2"
		eval "paidmax_$cfg=$2"
		set -- $(awk '{ for (i = 1; i <= NF; i++) s[i] += $i }
			END { for (i = 1; i <= 8; i++) printf "%d ", s[i] }' /tmp/ub-use-$cfg)
		measure "ulease-burst cfg=$cfg cpu0_deep=$1 cpu0_deep_pct=$(($2 * 100 / ($3 + 1))) cpu1_deep=$4 cpu1_deep_pct=$(($5 * 100 / ($6 + 1))) wakeups=$7 cpu_us=$8 $paid $r"
		eval "p90_$cfg=$(echo "$r" | sed -n 's/.*first_p90=\([0-9]*\).*/\1/p')"
		eval "rest90_$cfg=$(echo "$r" | sed -n 's/.*rest_p90=\([0-9]*\).*/\1/p')"
		eval "deep_$cfg=$1"
	done
	# the lease lets both CPUs sleep deep between bursts, and holds them
	# from the second read of a burst on at the latest (a resume latency
	# write does not wake a CPU already deep: the first read pays); the
	# rest of a burst pays no exit (half of one: 75 us)
	# nothing holding, the reads of a burst pay the exit: else the model
	# hides what the checks are about
	expect "ulease-burst-off-pays-exit first_p90=${p90_off}us floor=${p90_floor}us paid_exit_max=$paidmax_off" \
		"${p90_off:-0}" -ge $((${p90_floor:-0} + 100)) -a "${paidmax_off:-0}" -ge 2
	expect "ulease-burst-deep-between-bursts cpu0_deep=$deep_tp" "${deep_tp:-0}" -ge 10
	expect "ulease-burst-rest-held rest_p90=${rest90_tp}us floor=${rest90_floor}us" \
		"${rest90_tp:-999999}" -le $((${rest90_floor:-0} + 75))
	expect "ulease-burst-at-most-two-reads-pay paid_exit_max=$paidmax_tp" "${paidmax_tp:-9}" -le 2

	# sustained I/O at 200 and 50 us completions: p99 against deep
	# disabled
	mknull ul5 queue_mode=2 irqmode=2 completion_nsec=50000 submit_queues=2 \
		complete_cpu=1 irq_cpu=0 || fail setup-ul5
	echo 2 >/sys/block/ul5/queue/rq_affinity
	for d in ul ul5; do
		p99_floor= p99_tp= p99_off= p999_off=
		for cfg in floor tp floor tp off; do
			ulease_cfg_on $cfg
			set -- $(fio_qd1 $d 2000)
			ulease_cfg_off $cfg
			[ $cfg != off ] || p999_off=$(fio_pct 99.900000)
			measure "ulease-sustained dev=$d cfg=$cfg iops=$1 clat_mean_us=$2 p99_us=$3 p999_us=$(fio_pct 99.900000) max_us=$4"
			eval "p99_$cfg=\"\${p99_$cfg:-} $3\""
		done
		# held throughout: no exit at the p99 (half of one: 75 us).
		# The issue's 1.05x is not always met: the process's looks
		# (twice a timeout) run on the I/O CPUs; the ratio is in the
		# figures. At 50 us the governor keeps even "off" shallow
		# for the most part.
		# The exits "off" pays are counted at the p99.9: under 200 us
		# completions menu picks the deep state for about 1 read in
		# 100, so the p99 sits on the edge (a CI run saw 224 us with
		# the mean 1.4 us above the floor's: ~1 % paid 150 us).
		p99_off=${p99_off# }
		[ $d != ul ] || expect "ulease-sustained-off-pays-exit p99.9=${p999_off}us p99=${p99_off}us" \
			"${p999_off:-0}" -ge 300
		set -- $p99_floor $p99_tp
		measure "ulease-sustained-p99-ratio-pct dev=$d $(($3 * 100 / $1)) $(($4 * 100 / $2)) off=$((p99_off * 100 / $1))"
		expect "ulease-sustained-p99-no-exit-$d floor=$1,$2 tp=$3,$4" \
			"$3" -le $(($1 + 75)) -a "$4" -le $(($2 + 75))
	done
	rmnull ul5

	# what the process costs the I/O path and itself, on a disk that
	# completes at once: the static hold against the lease (the
	# tracepoint's events disabled while it holds, its stat read twice a
	# timeout)
	mknull ulh queue_mode=2 irqmode=0 submit_queues=2 || fail setup-ulh
	for cfg in static tp stat static tp stat; do
		ulease_cfg_on $cfg
		u0=0 w0=0 t0="0 0"
		[ $cfg = static ] || { u0=$(cpu_us $ul_pid); w0=$(wakeups $ul_pid); t0=$(ticks $ul_pid); }
		set -- $(fio_qd1 ulh 20000)
		u1=0 w1=0 t1="0 0"
		[ $cfg = static ] || { u1=$(cpu_us $ul_pid); w1=$(wakeups $ul_pid); t1=$(ticks $ul_pid); }
		ulease_cfg_off $cfg
		measure "ulease-hot cfg=$cfg iops=$1 clat_mean_us=$2 p99_us=$3 cpu_us=$((u1 - u0)) wakeups=$((w1 - w0)) utime_stime_ticks=$(echo $t0 $t1 | awk '{ print $3 - $1 "," $4 - $2 }')"
	done
	check_lease_role
	rmnull ulh
	rmnull ul
	grep -q . /tmp/ulease.log && sed 's/^/blkqos lease: /' /tmp/ulease.log | tail -n 40
}
