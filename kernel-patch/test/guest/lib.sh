# Sourced by the guest's /init (guest-init.sh). Helpers every family uses: reporting (pass, fail, measure, expect),
# null_blk devices, fio at QD1, the knobs' paths.

pass() { echo "BLKQOS-CHECK PASS $*"; }
fail() { echo "BLKQOS-CHECK FAIL $*"; }
measure() { echo "BLKQOS-MEASURE $*"; }
expect() { # name condition-words... : pass when the test(1) expression holds
	# (the status says which, for a caller that has more to print on a failure)
	name=$1
	shift
	if [ "$@" ]; then pass "$name"; else
		fail "$name" "($*)"
		return 1
	fi
}

mknull() { # name attr=value...
	d=$NULLB/$1
	shift
	mkdir "$d" || return 1
	for kv in "$@"; do
		echo "${kv#*=}" >"$d/${kv%%=*}" || return 1
	done
	echo 1 >"$d/power"
}

rmnull() {
	echo 0 >"$NULLB/$1/power"
	rmdir "$NULLB/$1"
}

# usage and time of the three states of a CPU: "u0 u1 u2 t0 t1 t2"
cat >/bin/idle-snap <<'EOF'
#!/bin/sh
c=/sys/devices/system/cpu/cpu$1/cpuidle
echo $(cat $c/state0/usage $c/state1/usage $c/state2/usage \
	$c/state0/time $c/state1/time $c/state2/time)
EOF
chmod 0755 /bin/idle-snap

# field N of "after - before" for two snap lines
delta() {
	echo "$1 $2" | awk -v n="$3" '{ print $(n + 6) - $n }'
}

# QD1 4k random reads pinned to CPU1; prints "iops clat_mean_us p99_us max_us"
fio_qd1() { # dev nr_ios [fio options]
	dev=$1 ios=$2
	shift 2
	fio --name=qd1 --filename="/dev/$dev" --rw=randread --bs=4k \
		--ioengine=psync --direct=1 --number_ios="$ios" --size=64m \
		--cpus_allowed=1 --norandommap --randrepeat=1 "$@" \
		--output-format=terse --terse-version=3 2>/tmp/fio.err |
		tee /tmp/fio.out |
		awk -F';' '$1 == 3 {
			p99 = 0
			for (i = 18; i <= 37; i++)
				if ($i ~ /^99\.000000%=/) { split($i, a, "="); p99 = a[2] }
			printf "%s %s %s %s\n", $8, $16, p99, $15
		}'
	if [ ! -s /tmp/fio.out ]; then
		sed 's/^/fio: /' /tmp/fio.err >&2
	fi
}

fio_pct() { # percentile (as fio names it: 99.900000) of the last fio_qd1, in us
	awk -F';' -v p="$1%" '$1 == 3 {
		for (i = 18; i <= 37; i++)
			if (index($i, p "=") == 1) { split($i, a, "="); print a[2] }
	}' /tmp/fio.out
}

knob() { echo "/sys/block/$1/queue/cpu_lat_$2"; }

# A CPU's lease as "<limit> <left>" from its two files, "-1 0" without
# one: the limit read again after the time, and both again if it changed
# (each file is a reading of its own). read, not cat: no exec per file,
# or 20 looks during a 2 s fio no longer fit in it under -icount
sysfs_lease() { # cpu
	_ld=/sys/devices/system/cpu/cpu$1/cpuidle
	for _lt in 1 2 3; do
		read -r _ll <$_ld/cpu_lat_lease_limit_us
		read -r _lr <$_ld/cpu_lat_lease_left_us
		read -r _la <$_ld/cpu_lat_lease_limit_us
		[ "$_la" = "$_ll" ] && break
	done
	echo "$_ll $_lr"
}

# Wait (up to 3 s) until no lease holds the CPU: the checks before leave
# leases of up to 200 ms; false if one still does
lease_wait_free() { # cpu
	_lw=0
	while read -r _ll </sys/devices/system/cpu/cpu$1/cpuidle/cpu_lat_lease_limit_us &&
		[ "$_ll" != -1 ]; do
		[ $_lw -lt 300 ] || return 1
		sleep 0.01
		_lw=$((_lw + 1))
	done
}
