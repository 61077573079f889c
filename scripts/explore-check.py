#!/usr/bin/env python3
"""Steps through an explorer page (`unwindlab run SCENARIO --explore PAGE
--log LOG`) in headless Chromium with the keyboard, and checks its state
panel against the run's event log:

* after the first request perf makes in an NMI, the task's unwind_mask
  holds PENDING and perf's bit (the bit its init event logged), its id is
  the request's cookie and its task_work holds the deferred work;
* after that cookie's callback, PENDING is gone (the handler's
  fetch_andnot) while perf's bit stays, the cache holds as many entries as
  the callback got, the event is on the CPU the log has it on, and the
  stack panel shows the sample;
* after the task's next reset, the mask is 0 and the cookie is gone;
* every event's panel is the same reached forward one step at a time and
  reached backward from the end (checkpoints);
* the tour plays the narration, each step at its event.

usage: explore-check.py PAGE LOG [PAGE LOG ...] [--shots DIR]
(DIR: three screenshots of the first page; one browser for all pages)
Exit status 0 when every check holds; the failures are printed otherwise.
"""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Chromium, press  # noqa: E402

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def main():
    args = sys.argv[1:]
    shots = None
    if "--shots" in args:
        i = args.index("--shots")
        shots = args[i + 1]
        del args[i:i + 2]
    pairs = list(zip(args[0::2], args[1::2]))
    if not pairs or len(args) % 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as profile:
        b = Chromium(profile)
        try:
            for k, (page, log) in enumerate(pairs):
                print(f"# {page}")
                check_page(b, page, log, shots if k == 0 else None)
        finally:
            b.close()
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


def check_page(b, page, log, shots):
    """The checks of one page and its log, in browser `b`."""
    events = [json.loads(l) for l in open(log) if '"seq"' in l]
    events = [e for e in events if "seq" in e]
    works = {e["work"]: e for e in events if e["event"] == "init"}
    r = next(i for i, e in enumerate(events) if e["event"] == "request" and e["in_nmi"] and e["ret"] == 0)
    req = events[r]
    tid, cookie = req["tid"], int(req["cookie"], 16)
    work = works[req["work"]]
    c = next(i for i in range(r, len(events))
             if events[i]["event"] == "callback" and events[i]["tid"] == tid and int(events[i]["cookie"], 16) == cookie)
    z = next(i for i in range(c, len(events)) if events[i]["event"] == "reset" and events[i]["tid"] == tid)
    handler = next(events[i] for i in range(r, c) if events[i]["event"] == "handler_start" and events[i]["tid"] == tid)

    b.open("file://" + os.path.abspath(page))
    check(b.eval("window.explorer && window.explorer.ready") is True, "the page is ready")
    check(b.eval("window.explorer.events") == len(events),
          f"the page has the log's {len(events)} kernel events")

    def current():
        return b.eval("window.explorer.current()")

    def go(target):
        while (at := current()) != target:
            d = target - at
            if abs(d) >= 100:
                press(b, "PageDown" if d > 0 else "PageUp")
            elif abs(d) >= 10:
                press(b, "ArrowRight" if d > 0 else "ArrowLeft", shift=True)
            else:
                press(b, "ArrowRight" if d > 0 else "ArrowLeft")

    def cell(field, section=f"task {tid} "):
        return b.eval(f"""(() => {{
            const r = [...document.querySelectorAll('#state tr[data-field]')].find(
                (t) => t.dataset.section.startsWith({json.dumps(section)}) && t.dataset.field === {json.dumps(field)});
            return r ? [r.querySelector('td.v').textContent, r.className] : null; }})()""")

    def panel():
        return b.eval("document.getElementById('state').innerText + document.getElementById('stack').innerText")

    bit = f"{work['name']} (bit {work['bit']})"
    go(r)
    mask = cell("unwind_mask")
    check(mask is not None and "PENDING" in mask[0] and bit in mask[0],
          f"event {r} (request in NMI): task {tid}'s unwind_mask {mask} holds PENDING and {bit}")
    # The mask changed inside the request, at an event of this NMI
    # (the request logs its return last): highlighted there.
    nmi = max(i for i in range(r) if events[i]["event"] == "nmi_enter")
    lit = []
    for i in range(r, nmi - 1, -1):
        go(i)
        if (m := cell("unwind_mask")) and m[1] == "changed":
            lit.append(i)
    check(len(lit) == 1 and events[lit[0]]["event"] in ("task_work_queued", "request"),
          f"the mask is highlighted at the one event of the NMI that set it: {[events[i]['event'] for i in lit]}")
    go(r)
    ident = cell("id (cookie)")
    check(ident is not None and ident[0].startswith(hex(cookie)), f"its id {ident} is cookie {hex(cookie)}")
    tw = cell("task_work")
    check(tw is not None and "unwind_deferred_task_work" in tw[0], f"its task_work {tw} holds the deferred work")
    if shots:
        b.screenshot(os.path.join(shots, "explorer-request.png"))

    go(c)
    mask = cell("unwind_mask")
    check(mask is not None and "PENDING" not in mask[0] and bit in mask[0],
          f"event {c} (callback): unwind_mask {mask} holds {bit} without PENDING "
          f"(the handler took bits {hex(handler['bits'])})")
    cached = cell("cache: entries")
    nr = events[c]["nr"]
    check(cached is not None and cached[0].count(" ← ") + 1 == nr,
          f"the cache holds the callback's {nr} entries, named: {cached}")
    cpu = events[c]["cpu"]
    check(f"CPU {cpu}" in b.eval("document.getElementById('where').textContent"),
          f"the callback is on CPU {cpu}, as logged")
    stack = b.eval("document.getElementById('sample') && document.getElementById('sample').textContent")
    check(stack is not None and f"cookie {hex(cookie)}" in stack, f"the stack panel shows the sample: {stack}")
    if shots:
        b.screenshot(os.path.join(shots, "explorer-callback.png"))

    go(z)
    mask, ident = cell("unwind_mask"), cell("id (cookie)")
    check(mask is not None and mask[0] == "0" and ident is not None and ident[0].startswith("0 "),
          f"event {z} (reset): unwind_mask {mask}, id {ident} cleared")

    # Every event's panels reached forward one step at a time and
    # backward from the end (the state rebuilt from checkpoints):
    # keys dispatched inside the page, for speed.
    same = b.eval("""(() => {
        const key = (k) => document.dispatchEvent(new KeyboardEvent('keydown', {key: k}));
        const panel = () => document.getElementById('state').innerText + document.getElementById('stack').innerText;
        const n = window.explorer.events, forward = [];
        key('Home');
        for (let i = 0; i < n; i++) { if (i) key('ArrowRight'); forward.push(panel()); }
        key('End');
        for (let i = n - 1; i >= 0; i--) {
            if (panel() !== forward[i]) return i;
            key('ArrowLeft');
        }
        return -1; })()""")
    check(same == -1, f"every event's panels are the same reached forward and backward (first difference: {same})")
    press(b, "End")
    check(current() == len(events) - 1, "End goes to the last event")
    tour = json.loads(b.eval("document.getElementById('data').textContent"))["tour"]
    press(b, "t")
    text = b.eval("document.getElementById('tour').innerText")
    check(tour and tour[0][1][:40] in text and current() == tour[0][0], "t starts the tour at its first step")
    step = next((k for k, s in enumerate(tour) if s[1].startswith("4.")), 1)
    for _ in range(step):
        press(b, "n")
    text = b.eval("document.getElementById('tour').innerText")
    check(tour[step][1][:40] in text and current() == tour[step][0],
          f"n goes to step {step + 1}, at event {tour[step][0]}")
    if shots:
        b.screenshot(os.path.join(shots, "explorer-tour.png"))
    press(b, "Escape")
    check(b.eval("document.getElementById('tour').className") == "", "Escape ends the tour")


if __name__ == "__main__":
    sys.exit(main())
