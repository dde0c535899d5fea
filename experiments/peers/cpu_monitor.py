"""Sample the CPU seconds (user + system) of processes every second: python cpu_monitor.py OUT.jsonl PID... (until all end)."""
import os, sys, time, json
pids = [int(p) for p in sys.argv[2:]]
tck = os.sysconf("SC_CLK_TCK")
with open(sys.argv[1], "a") as f:
    while True:
        row = {"t": time.time()}
        alive = 0
        for p in pids:
            try:
                s = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
                row[str(p)] = (int(s[11]) + int(s[12])) / tck
                alive += 1
            except FileNotFoundError:
                pass
        if not alive:
            break
        f.write(json.dumps(row) + "\n"); f.flush()
        time.sleep(1)
