#!/usr/bin/env python3
"""Drive Debian's headless Chromium through a page, step by step, and print what it ended on.

    drive.py [options] URL [STEP ...]
    drive.py [options] --steps-file steps.json URL
    drive.py [options] --steps '[{"fill": "#cb0", "value": "demo"}, ...]' URL

Steps (JSON objects; on the command line the short form in brackets):
    {"fill": CSS, "value": TEXT}        type TEXT into the element (cleared first)  [fill:CSS=TEXT]
    {"click": CSS}                      click the element once it is clickable      [click:CSS]
    {"wait_element": CSS}               wait until the element is visible           [wait-element:CSS]
    {"wait_gone": CSS}                  wait until no such element is visible       [wait-gone:CSS]
    {"wait_path": PATH}                 wait until location.pathname == PATH        [wait-path:PATH]
    {"wait_url_contains": TEXT}         wait until the URL contains TEXT            [wait-url:TEXT]
    {"wait_text": TEXT}                 wait until the page's text contains TEXT    [wait-text:TEXT]
    {"wait_text": TEXT, "in": CSS}      ... the text of that element                [wait-text-in:CSS=TEXT]
    {"pause": SECONDS}                  let the page run (at most 10 s)             [pause:SECONDS]
    {"snapshot": NAME}                  record URL, text, navigation, document.cookie [snapshot:NAME]
    {"open": URL}                       navigate the same browser to another URL    [open:URL]
    {"reload": true}                    reload the current page                     [reload:]
    {"screenshot": PATH}                save a PNG of the page as it is now         [screenshot:PATH]
    {"fill_from_file": CSS, "glob": G, "pattern": RE}
                                        wait for a file matching the glob G (newest first) whose
                                        text matches the regex RE, and type its first group into CSS
                                        (a code from an email in an outbox folder)
    {"new_tab": URL}                    open URL in a new tab of the same browser (same cookies)
                                        and go on in it                             [new-tab:URL]
    {"switch_tab": N}                   go on in tab N (0 is the first, in the order opened) [switch-tab:N]
    {"open_from_file": G, "pattern": RE, "in_new_tab": BOOL}
                                        like fill_from_file, but open the first group as a URL
                                        (a link from an email), in a new tab if in_new_tab
    {"viewport": "WxH"}                 emulate a phone: a mobile viewport of W x H CSS pixels
                                        (device pixel ratio 2, touch) in this tab; "desktop" ends
                                        it (the window, --window-size)              [viewport:WxH]
    {"virtual_authenticator": {"uv": BOOL, "resident": BOOL}}
                                        give this tab Chromium's virtual WebAuthn authenticator (CTAP2,
                                        internal, user present; "uv": it verifies the person; "resident":
                                        discoverable credentials); the result then lists its
                                        credentials (`credentials`: id, rp_id, sign_count)  [authenticator:uv]
    {"clear_cookies": true}             forget every cookie (signed out; the authenticator stays) [clear-cookies:]
A wait step may carry "timeout" (seconds; default --step-timeout).

Output, on stdout, one JSON object (also on failure):
    ok, error, url, path, title, text (body innerText), cookies (with httpOnly/secure/sameSite),
    document_cookie (what the page's script sees: no HttpOnly cookie),
    console (all browser log entries), console_errors (the SEVERE ones), network (the document
    requests' statuses and redirects), snapshots, steps (each with ok and ms).
Exit status: 0 all steps done; 1 a step failed or timed out; 2 bad usage; 3 browser, driver or
selenium missing or not starting; 124 the overall --timeout passed (everything is killed).

Never downloads anything: chromedriver is /usr/bin/chromedriver (Service(...) given explicitly, so
Selenium Manager is not used) and the browser is Debian's /usr/bin/chromium; each run gets a fresh
profile in a temporary directory, removed afterwards.
"""

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from urllib.parse import urlsplit

CHROMEDRIVER = os.environ.get("DRIVE_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM = os.environ.get("DRIVE_CHROMIUM", "/usr/bin/chromium")

EXIT_STEP, EXIT_USAGE, EXIT_ENV, EXIT_TIMEOUT = 1, 2, 3, 124

_print_lock = threading.Lock()
_printed = False


def emit(result, code):
    """Prints the result once (the watchdog and the main thread may race) and exits."""
    global _printed
    with _print_lock:
        if not _printed:
            _printed = True
            sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
            sys.stdout.flush()
            if not result.get("ok"):
                sys.stderr.write("drive.py: %s\n" % result.get("error"))
                sys.stderr.flush()
    return code


# ---------------------------------------------------------------------------------------------
# Processes: everything this script starts (chromedriver, chromium and its helpers) is killed
# when it ends, however it ends.

def _children_of():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
            rest = stat[stat.rindex(")") + 2:].split()
            ppid, pgrp = int(rest[1]), int(rest[2])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append((int(d), pgrp))
    return kids


def kill_descendants():
    """SIGKILLs every descendant of this process and every member of its process group."""
    me = os.getpid()
    try:
        mygroup = os.getpgrp()
        tree = _children_of()
    except OSError:
        return
    victims, todo = set(), [me]
    while todo:
        for pid, _ in tree.get(todo.pop(), []):
            if pid not in victims:
                victims.add(pid)
                todo.append(pid)
    if mygroup == me:  # our own group (see main): orphaned helpers are still in it
        for procs in tree.values():
            victims.update(pid for pid, pgrp in procs if pgrp == mygroup)
    victims.discard(me)
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------
# Steps

SHORT = {
    "fill": "fill", "click": "click", "wait-element": "wait_element", "wait-gone": "wait_gone",
    "wait-path": "wait_path", "wait-url": "wait_url_contains", "wait-text": "wait_text",
    "wait-text-in": "wait_text_in", "pause": "pause", "snapshot": "snapshot", "open": "open",
    "reload": "reload", "screenshot": "screenshot", "new-tab": "new_tab", "switch-tab": "switch_tab",
    "viewport": "viewport", "authenticator": "virtual_authenticator",
    "clear-cookies": "clear_cookies",
}
KINDS = ("fill", "click", "wait_element", "wait_gone", "wait_path", "wait_url_contains", "wait_text",
         "pause", "snapshot", "open", "reload", "screenshot", "fill_from_file", "new_tab", "switch_tab",
         "open_from_file", "viewport", "virtual_authenticator", "clear_cookies")


def parse_short(s):
    kind, sep, arg = s.partition(":")
    if not sep or kind not in SHORT:
        raise ValueError("step '%s' is not KIND:ARG with KIND one of %s" % (s, ", ".join(SHORT)))
    kind = SHORT[kind]
    if kind == "fill":
        css, eq, value = arg.partition("=")
        if not eq:
            raise ValueError("step '%s': fill needs CSS=TEXT" % s)
        return {"fill": css, "value": value}
    if kind == "wait_text_in":
        css, eq, text = arg.partition("=")
        if not eq:
            raise ValueError("step '%s': wait-text-in needs CSS=TEXT" % s)
        return {"wait_text": text, "in": css}
    if kind == "pause":
        return {"pause": float(arg)}
    return {kind: arg}


def check_step(step):
    if not isinstance(step, dict):
        raise ValueError("step %r is not a JSON object" % (step,))
    kinds = [k for k in KINDS if k in step]
    if len(kinds) != 1:
        raise ValueError("step %s must have exactly one of %s" % (json.dumps(step), ", ".join(KINDS)))
    if kinds[0] == "fill_from_file" and not (isinstance(step.get("glob"), str) and isinstance(step.get("pattern"), str)):
        raise ValueError("step %s: fill_from_file needs \"glob\" and \"pattern\"" % json.dumps(step))
    if kinds[0] == "open_from_file" and not isinstance(step.get("pattern"), str):
        raise ValueError("step %s: open_from_file needs \"pattern\"" % json.dumps(step))
    if kinds[0] == "switch_tab" and not (isinstance(step["switch_tab"], int) or str(step["switch_tab"]).isdigit()):
        raise ValueError("step %s: switch_tab needs a tab number (0 is the first)" % json.dumps(step))
    if kinds[0] == "viewport" and step["viewport"] != "desktop" and not _viewport(step["viewport"]):
        raise ValueError("step %s: viewport needs WIDTHxHEIGHT (CSS pixels) or \"desktop\"" % json.dumps(step))
    if kinds[0] == "fill" and not isinstance(step.get("value"), str):
        raise ValueError("step %s: fill needs a string \"value\"" % json.dumps(step))
    return kinds[0]


def describe(step):
    """The step for the log, with filled values masked (they are often passwords)."""
    shown = dict(step)
    if "fill" in shown:
        shown["value"] = "*" * len(step["value"])
    return shown


# ---------------------------------------------------------------------------------------------

def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("url")
    ap.add_argument("steps", nargs="*", help="steps in the short form (see below)")
    ap.add_argument("--steps", dest="steps_json", help="the steps as a JSON array")
    ap.add_argument("--steps-file", help="a file holding the steps as a JSON array")
    ap.add_argument("--timeout", type=float, default=45, help="the whole run, in seconds (default 45)")
    ap.add_argument("--step-timeout", type=float, default=10, help="each wait, in seconds (default 10)")
    ap.add_argument("--screenshot", help="save a PNG of the final page here")
    ap.add_argument("--window-size", default="1024,768")
    ap.add_argument("--allow-host", action="append", default=["localhost", "127.0.0.1", "[::1]"],
                    help="a host the browser may reach (repeatable; the loopback names always)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else 0

    result = {"ok": False, "error": None, "start": args.url, "url": None, "path": None, "title": None,
              "text": None, "cookies": [], "document_cookie": None, "console": [], "console_errors": [], "network": [],
              "snapshots": {}, "steps": []}

    try:
        steps = []
        if args.steps_json:
            steps += json.loads(args.steps_json)
        if args.steps_file:
            with open(args.steps_file) as f:
                steps += json.load(f)
        steps += [parse_short(s) for s in args.steps]
        for s in steps:
            check_step(s)
    except (ValueError, OSError) as e:
        result["error"] = "bad steps: %s" % e
        return emit(result, EXIT_USAGE)

    # Our own process group, so that helpers chromium re-parents away are still found at the end.
    try:
        if os.getpgrp() != os.getpid() and os.getsid(0) != os.getpid():
            os.setpgid(0, 0)
    except OSError:
        pass

    # The hard deadline: whatever hangs (chromedriver, a page, quit()), the run ends.
    def watchdog():
        result["error"] = "timed out: the whole run took more than %g s (last step: %s)" % (
            args.timeout, json.dumps(result["steps"][-1]["step"]) if result["steps"] else "starting the browser")
        emit(result, EXIT_TIMEOUT)
        kill_descendants()
        shutil.rmtree(profile, ignore_errors=True)
        os._exit(EXIT_TIMEOUT)

    profile = tempfile.mkdtemp(prefix="drive-chromium-")
    timer = threading.Timer(args.timeout, watchdog)
    timer.daemon = True
    timer.start()
    deadline = time.monotonic() + args.timeout

    driver = None
    code = EXIT_STEP
    try:
        try:
            from selenium import webdriver
            from selenium.common.exceptions import TimeoutException, WebDriverException
            from selenium.webdriver.chrome.service import Service
            from selenium.webdriver.common.by import By
            from selenium.webdriver.support import expected_conditions as EC
            from selenium.webdriver.support.ui import WebDriverWait
        except ImportError as e:
            result["error"] = ("python module selenium is missing for %s (%s): run scripts/install-deps.sh"
                               % (sys.executable, e))
            code = EXIT_ENV
            return emit(result, code)
        for path, pkg in ((CHROMEDRIVER, "chromium-driver"), (CHROMIUM, "chromium")):
            if not os.access(path, os.X_OK):
                result["error"] = "%s is not installed (Debian package %s): run scripts/install-deps.sh" % (path, pkg)
                code = EXIT_ENV
                return emit(result, code)

        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                  "--user-data-dir=" + profile, "--window-size=" + args.window_size,
                  "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-default-apps", "--metrics-recording-only", "--password-store=basic",
                  # Keep the browser on this machine: no host resolves but the --allow-host ones
                  # (loopback), so a page that wrongly sent the browser to another site fails
                  # there (ERR_NAME_NOT_RESOLVED) instead of reaching out.
                  "--host-resolver-rules=MAP * ~NOTFOUND, " + ", ".join("EXCLUDE " + h for h in args.allow_host)):
            opts.add_argument(a)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        opts.page_load_strategy = "normal"
        try:
            service = Service(executable_path=CHROMEDRIVER, log_output=os.devnull)
            driver = webdriver.Chrome(service=service, options=opts)
        except WebDriverException as e:
            result["error"] = "chromium did not start: %s" % (e.msg or e).__str__().strip()
            code = EXIT_ENV
            return emit(result, code)

        def remaining(cap):
            return max(0.1, min(cap, deadline - time.monotonic() - 2))

        driver.set_page_load_timeout(remaining(args.step_timeout * 2))
        driver.set_script_timeout(remaining(args.step_timeout))

        def drain_logs():
            for kind in ("browser", "performance"):
                try:
                    entries = driver.get_log(kind)
                except Exception:  # not every driver has every log
                    continue
                if kind == "browser":
                    result["console"] += entries
                    continue
                for e in entries:
                    try:
                        m = json.loads(e["message"])["message"]
                    except (KeyError, ValueError):
                        continue
                    p = m.get("params", {})
                    if m.get("method") == "Network.requestWillBeSent" and p.get("redirectResponse"):
                        r = p["redirectResponse"]
                        result["network"].append({"url": r.get("url"), "status": r.get("status"),
                                                  "location": {k.lower(): v for k, v in r.get("headers", {}).items()}.get("location"),
                                                  "type": p.get("type")})
                    elif m.get("method") == "Network.responseReceived" and p.get("type") in ("Document", "Fetch", "XHR"):
                        r = p.get("response", {})
                        result["network"].append({"url": r.get("url"), "status": r.get("status"), "type": p.get("type")})

        def page_text(css=None):
            try:
                if css:
                    els = driver.find_elements(By.CSS_SELECTOR, css)
                    return " ".join(el.text for el in els)
                return driver.execute_script("return document.body ? document.body.innerText : ''") or ""
            except WebDriverException:
                return ""

        def document_cookie():
            try:
                return driver.execute_script("return document.cookie")
            except WebDriverException:
                return None

        def path_now():
            try:
                return urlsplit(driver.current_url).path
            except WebDriverException:
                return None

        def wait(step, cond, what):
            t = remaining(float(step.get("timeout", args.step_timeout)))
            try:
                return WebDriverWait(driver, t, poll_frequency=0.05).until(lambda d: cond())
            except TimeoutException:
                raise StepFailed("%s within %g s (at %s; page text: %r)" % (
                    what, t, driver.current_url, page_text()[:300]))

        def open_url(url):
            driver.get(url)
            # Some failures (e.g. ERR_UNSAFE_PORT) load Chromium's error page without an error.
            try:
                doc = driver.execute_script("return document.documentURI") or ""
            except WebDriverException:
                doc = ""
            if doc.startswith("chrome-error:"):
                raise StepFailed("%s did not load: the browser shows its error page (%r)" % (
                    url, " ".join(page_text().split())[:200]))

        authenticators = []

        def run(step):
            kind = check_step(step)
            arg = step[kind]
            if kind == "open":
                open_url(arg)
            elif kind == "reload":
                driver.refresh()
            elif kind == "clear_cookies":
                driver.delete_all_cookies()
            elif kind == "virtual_authenticator":
                from selenium.webdriver.common.virtual_authenticator import VirtualAuthenticatorOptions
                o = VirtualAuthenticatorOptions()
                o.protocol = VirtualAuthenticatorOptions.Protocol.CTAP2
                o.transport = VirtualAuthenticatorOptions.Transport.INTERNAL
                want = arg if isinstance(arg, dict) else {"uv": arg == "uv", "resident": True}
                o.has_resident_key = bool(want.get("resident", True))
                o.has_user_verification = bool(want.get("uv", False))
                o.is_user_verified = bool(want.get("uv", False))
                o.is_user_consenting = True
                driver.add_virtual_authenticator(o)
                authenticators.append(o)
            elif kind == "screenshot":
                driver.save_screenshot(arg)
            elif kind == "new_tab":
                driver.switch_to.new_window("tab")
                open_url(arg)
            elif kind == "switch_tab":
                handles = driver.window_handles
                n = int(arg)
                if n >= len(handles):
                    raise StepFailed("there is no tab %d (%d open)" % (n, len(handles)))
                driver.switch_to.window(handles[n])
            elif kind == "open_from_file":
                found = wait(step, lambda: _from_file(arg, step["pattern"]),
                             "no file %s matching %r" % (arg, step["pattern"]))
                if step.get("in_new_tab"):
                    driver.switch_to.new_window("tab")
                open_url(found)
            elif kind == "viewport":
                if arg == "desktop":
                    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
                    driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": False})
                else:
                    w, h = _viewport(arg)
                    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                           {"width": w, "height": h, "deviceScaleFactor": 2, "mobile": True})
                    driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5})
            elif kind == "fill_from_file":
                found = wait(step, lambda: _from_file(step["glob"], step["pattern"]),
                             "no file %s matching %r" % (step["glob"], step["pattern"]))
                el = wait(step, lambda: _visible(driver, By, arg), "no visible element %s to fill" % arg)
                el.clear()
                el.send_keys(found)
            elif kind == "fill":
                el = wait(step, lambda: _visible(driver, By, arg), "no visible element %s to fill" % arg)
                el.clear()
                el.send_keys(step["value"])
            elif kind == "click":
                wait(step, lambda: EC.element_to_be_clickable((By.CSS_SELECTOR, arg))(driver),
                     "no clickable element %s" % arg).click()
            elif kind == "wait_element":
                wait(step, lambda: _visible(driver, By, arg), "no visible element %s" % arg)
            elif kind == "wait_gone":
                wait(step, lambda: not _visible(driver, By, arg), "element %s still visible" % arg)
            elif kind == "wait_path":
                wait(step, lambda: path_now() == arg, "the URL path did not become %s" % arg)
            elif kind == "wait_url_contains":
                wait(step, lambda: arg in driver.current_url, "the URL did not come to contain %r" % arg)
            elif kind == "wait_text":
                css = step.get("in")
                wait(step, lambda: arg in page_text(css),
                     "the text %r did not appear%s" % (arg, " in " + css if css else ""))
            elif kind == "pause":
                time.sleep(min(10.0, max(0.0, float(arg)), max(0.0, deadline - time.monotonic() - 3)))
            elif kind == "snapshot":
                drain_logs()
                nav = driver.execute_script(
                    "var n = performance.getEntriesByType('navigation')[0];"
                    "return n ? {type: n.type, redirectCount: n.redirectCount, name: n.name} : null")
                result["snapshots"][str(arg)] = {"url": driver.current_url, "path": path_now(),
                                                 "title": driver.title, "text": page_text(), "navigation": nav,
                                                 "document_cookie": document_cookie()}

        try:
            t0 = time.monotonic()
            record = {"step": {"open": args.url}, "ok": False, "ms": None}
            result["steps"].append(record)
            open_url(args.url)
            record.update(ok=True, ms=int((time.monotonic() - t0) * 1000))
            for step in steps:
                t0 = time.monotonic()
                record = {"step": describe(step), "ok": False, "ms": None}
                result["steps"].append(record)
                run(step)
                record.update(ok=True, ms=int((time.monotonic() - t0) * 1000))
            code = 0
        except StepFailed as e:
            result["error"] = "step %d %s failed: %s" % (len(result["steps"]) - 1, json.dumps(record["step"]), e)
        except WebDriverException as e:
            result["error"] = "step %d %s failed: %s" % (len(result["steps"]) - 1, json.dumps(record["step"]),
                                                         str(e.msg or e).strip().splitlines()[0])

        try:
            drain_logs()
            result["url"] = driver.current_url
            result["path"] = path_now()
            result["title"] = driver.title
            result["text"] = page_text()
            result["cookies"] = driver.get_cookies()
            result["document_cookie"] = document_cookie()
            if authenticators:
                result["credentials"] = [{"id": c.id, "rp_id": c.rp_id, "sign_count": c.sign_count,
                                          "resident": c.is_resident_credential} for c in driver.get_credentials()]
            if args.screenshot:
                driver.save_screenshot(args.screenshot)
        except WebDriverException as e:
            if code == 0:
                code = EXIT_STEP
                result["error"] = "reading the final page failed: %s" % str(e.msg or e).strip()
        result["console_errors"] = [e for e in result["console"] if e.get("level") == "SEVERE"]
        result["ok"] = code == 0
        return emit(result, code)
    except Exception as e:  # anything unexpected still ends with a JSON result
        result["error"] = "unexpected %s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())
        return emit(result, EXIT_STEP)
    finally:
        if driver is not None:
            # quit() asks chromedriver to close chromium; bounded by the watchdog all the same.
            q = threading.Thread(target=_quietly, args=(driver.quit,), daemon=True)
            q.start()
            q.join(max(0.5, min(10.0, deadline - time.monotonic())))
        kill_descendants()
        timer.cancel()
        shutil.rmtree(profile, ignore_errors=True)


class StepFailed(Exception):
    pass


def _visible(driver, By, css):
    for el in driver.find_elements(By.CSS_SELECTOR, css):
        try:
            if el.is_displayed():
                return el
        except Exception:  # went stale while we looked
            continue
    return False


def _viewport(text):
    """(width, height) from "390x844", or None."""
    w, x, h = str(text).partition("x")
    return (int(w), int(h)) if x and w.isdigit() and h.isdigit() and int(w) > 0 and int(h) > 0 else None


def _from_file(pattern, regex):
    """The first group of `regex` in the newest file matching the glob `pattern`, or False."""
    import glob
    import re
    for path in sorted(glob.glob(pattern), key=os.path.getmtime, reverse=True):
        try:
            with open(path, errors="replace") as f:
                m = re.search(regex, f.read())
        except OSError:
            continue
        if m:
            return m.group(1)
    return False


def _quietly(f):
    try:
        f()
    except Exception:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
