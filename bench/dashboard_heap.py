"""Where does the dashboard's memory grow? --local on a log written at 40 lines/s,
headless (Textual's run_test), tracemalloc snapshots every PERIOD s compared."""
import asyncio, gc, os, sys, threading, time, tracemalloc
sys.path.insert(0, "/work/main/src"); sys.path.insert(0, "/work/main/tests")
from gputui.config import Settings
from ui_scenarios import make_app

MINUTES = float(sys.argv[1]); PERIOD = float(sys.argv[2])
log = "/tmp/leak/train.log"
open(log, "w").close()
stop = threading.Event()
def writer():
    n = 0
    with open(log, "a") as f:
        while not stop.is_set():
            n += 1
            f.write(f"step {n} | loss {8.0/(1+n*0.01):.4f} | {48000 + n % 97} tok/s\n"); f.flush()
            time.sleep(0.025)
threading.Thread(target=writer, daemon=True).start()
os.environ["XDG_STATE_HOME"] = "/tmp/leak/state"
settings = Settings(local=True, log=log, history=True)
app, parts = make_app(settings)
def rss():
    for ln in open("/proc/self/status"):
        if ln.startswith("VmRSS"): return int(ln.split()[1]) / 1024
async def main():
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.sleep(120)  # warm-up
        gc.collect(); tracemalloc.start(12)
        base = tracemalloc.take_snapshot(); t0 = time.time(); r0 = rss()
        print(f"start rss {r0:.1f} MiB", flush=True)
        while time.time() - t0 < MINUTES * 60:
            await asyncio.sleep(PERIOD)
            gc.collect()
            snap = tracemalloc.take_snapshot()
            cur, peak = tracemalloc.get_traced_memory()
            print(f"\n== {time.time()-t0:.0f} s rss {rss():.1f} MiB (+{rss()-r0:.1f}) traced {cur/2**20:.1f} MiB", flush=True)
            for st in snap.compare_to(base, "traceback")[:6]:
                print(f"{st.size_diff/1024:+.0f} KiB {st.count_diff:+d} blocks", flush=True)
                for line in st.traceback.format()[-12:]:
                    print("   ", line, flush=True)
        stop.set()
asyncio.run(main())
