#!/usr/bin/env python3
"""List the messages Kubernetes and the Kubeflow training operator print about a
training job's pods: kubelet/scheduler events, container status reasons and
messages, eviction and admission messages, and the training operator's job
conditions, events, errors and log lines.

Sources
  * Kubeflow training operator: every *.go file under pkg/ of a git revision
    (default: the release-1.9 branch, the newest code that still has the v1
    PyTorchJob/MPIJob/TFJob/XGBoostJob/PaddleJob/JAXJob controllers; master
    deleted them in "Remove the Training Operator V1 Source Code (#2389)"),
    read with `git --git-dir DIR show REV:PATH`. Skipped: pkg/client (generated
    clients), pkg/apis (types; still read for constants), zz_generated*,
    *_test.go, test helpers (testutil/, testing/).
  * Kubernetes (kubelet, scheduler) and the container runtimes' status reasons:
    the files listed in K8S_FILES below, each at the commit it was read at (one
    stored version per file, so commits differ from file to file), taken from a
    directory of copies laid out as REPO/PATH (--k8s-dir). A copy may be the
    whole file or only its first lines; only lines 1..N (N from K8S_FILES) are
    read, so a full checkout of that commit gives the same rows. To rebuild the
    copies: `git show COMMIT:PATH` in a clone of the repository, or
    https://raw.githubusercontent.com/REPO/COMMIT/PATH, truncated to N lines.

Rules (Go source is tokenized; comments ignored; a call spanning lines is one
call, reported at the line of its name)
  * Formats are the string literals of fmt.Errorf/fmt.Sprintf/errors.New,
    record.Event/Eventf (and the kubelet's recordContainerEvent/logIt
    wrappers), klog/logr/logrus/glog calls (Info/Infof/InfoS/Warning/Warningf/
    Error/Errorf/ErrorS ...; for logr-style calls the message argument, for
    fmt.Sprint-style ones the first literal argument), job conditions
    (commonutil.UpdateJobConditions, updateMPIJobConditions) and `Message:`/
    `message:` fields of composite literals (conditions, PodAdmitResult,
    PodStatus). Concatenated literals are joined ("a" + "b"); a string constant
    (`Name = "..."`, same package first, else unambiguous in the tree read) is
    replaced by its value; commonutil.NewReason(kind, reason) is its two parts
    joined; any other non-literal piece is written as %v. Go %-verbs are kept
    as written.
  * A fmt.Sprintf (or a string literal) stored in a variable is followed
    through its block (`:=`) or the rest of its function (`=`) to the calls
    that print it: event, condition, log, error, status message, return value;
    its row is at the Sprintf's line and its `how` names those sinks. A
    Sprintf that reaches none (object names, patches, env values) is dropped,
    and so is one returned by a String() method.
  * how: fmt.Errorf, errors.New, Event(Warning,REASON), Eventf(Normal,REASON)
    (`*` in a reason stands for the job kind), condition(TYPE), status(REASON),
    RECV.Error() (the text of an error type: FitError.Error() is the scheduler's
    "0/N nodes are available: ..." message), fmt.Sprintf(return), klog.ErrorS,
    log.Error, logrus.Warnf ..., field.Required/admission warning (validating
    webhooks); several sinks are joined with "+". Event types are kept as the
    API names them: Warning events are the failures `kubectl describe` shows.
  * Rows that are not calls: `how` = "reason" for a container/pod status
    reason at the line defining it: a constant (containerd's StartError/
    Completed/Error/OOMKilled, cri-dockerd's ContainerCannotRun, the kubelet's
    Evicted, DeadlineExceeded, OutOfcpu ...), an `ErrX = errors.New("CamelCase")`
    (CrashLoopBackOff, ErrImagePull, ImagePullBackOff, CreateContainerError ...)
    or the kubelet's "OutOf%s"; "status(Evicted)" for the eviction message
    constants (*MessageFmt: "The node was low on resource: %v. " ...);
    "Unschedulable reason" for the scheduler's NodeResourcesFit reasons
    ("Insufficient %v", "Too many pods"); "initContainer echo" for the echo in
    the PyTorch init container's shell command ("waiting for master").
  * Dropped: formats with fewer than 3 words of literal text (placeholders
    removed; an event's reason counts as a word, since kubectl prints it with
    the message; reason rows excepted); debug and verbosity-gated (V(n)) info
    logs; and purely informational ones: Normal events, Info logs,
    Running/Succeeded/Created/... conditions and return values whose text
    names no failure (fail, error, exit, restart, evict, kill, OOM, back-off,
    unable, cannot, not found, invalid, missing, insufficient, timeout,
    terminat, preempt, unhealthy, probe ...) or that report a success. From the container runtimes'
    files only the reason rows are kept. Fake controllers (receivers named
    Fake*) are skipped.

Output (stdout): TSV, UTF-8, no quoting: a version comment line
`# Kubernetes mixed ; Kubeflow-training-operator <describe> <commit> ...`,
a `# note:` line, the header `path<TAB>line<TAB>how<TAB>format`, then one row
per call site sorted by path then line. Paths are prefixed with their source:
kubeflow:, k8s:, containerd:, cri-dockerd:. Backslash, newline, tab and CR in a
format are written as \\\\, \\n, \\t, \\r.

Usage:
    python3 scripts/sources/extract_k8s_formats.py \\
        --kubeflow-git-dir /path/training-operator/.git --kubeflow-rev release-1.9 \\
        --k8s-dir /path/k8s-copies > collectors/sources/kubernetes_formats.tsv
"""
import argparse
import os
import re
import subprocess
import sys

# (path prefix, repository, path, commit, lines read) of the non-Kubeflow files.
K8S_FILES = [
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/events/event.go",
     "819ecd4dbe6afbaa4f6227d22b9c46938d48e603", None),
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/kuberuntime/kuberuntime_manager.go",
     "000f26050b9be6fb3d79fae95e06b47fc96128cd", 1548),
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/kuberuntime/kuberuntime_container.go",
     "fbba6b47ad9824012048624a5ef60669e8109517", 834),
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/images/image_manager.go",
     "cfce511e157eb37917f5ad1d86197e732f0a097f", None),
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/images/types.go",
     "64c0164cec061bebeb9ed31a487b4c49d3a5104a", None),
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/container/sync_result.go",
     "008b3652959ca58af8be3fb5b6ecfe9ae7638282", None),
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/eviction/helpers.go",
     "008b3652959ca58af8be3fb5b6ecfe9ae7638282", 75),
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/active_deadline.go",
     "04791b4906602ffda5ccf9bc4c84d3329f1d7080", None),
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/prober/prober.go",
     "1b79bc18127b3f7212b1aaee63789e50d7ae5848", None),
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/preemption/preemption.go",
     "01fe44662eeddbab0391a6ecef60e9fe4334513f", None),
    ("k8s", "kubernetes/kubernetes", "pkg/kubelet/lifecycle/predicate.go",
     "00991fb96b40c675ccdc8b61d9893a5f7de526ec", None),
    ("k8s", "kubernetes/kubernetes", "pkg/scheduler/framework/plugins/noderesources/fit.go",
     "007f7ae7dc217d27dad994dce003cfe1c5bc6706", None),
    ("k8s", "kubernetes/kubernetes", "pkg/scheduler/framework/types.go",
     "f899a310e19fe200bd65d3b94205abcc7dd967b1", 294),
    ("containerd", "containerd/containerd", "internal/cri/server/helpers.go",
     "6d0545dc897936c088c821fbf6fdbe7c86e8e84e", 81),
    ("cri-dockerd", "Mirantis/cri-dockerd", "core/container_status.go",
     "ede58f3a92e114a9c21d211936be2902f7a6bd62", None),
]

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>`[^`]*`)
  | (?P<str>"(?:\\.|[^"\\\n])*")
  | (?P<chr>'(?:\\.|[^'\\\n])*')
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>:=|\.\.\.|&&|\|\||==|!=|<=|>=|<-|\+=|.)
""", re.S | re.X)
ESC = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
       "v": "\v", "\\": "\\", "'": "'", '"': '"'}
FAILURE = re.compile(
    r"fail|error|\berr\b|exit|restart|evict|kill|oom|back-?off|unable|cannot|can't|"
    r"couldn't|could not|not found|not exist|not present|not supported|not ready|not available|"
    r"invalid|missing|insufficient|timeout|timed out|terminat|"
    r"preempt|unhealthy|probe|denied|refused|crash|lost|no such|too many|exceed|low on|"
    r"abort|conflict|unsupported|nil\b|empty",
    re.I)
VERB = re.compile(r"%[-+# 0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[vTtbcdoOqxXUeEfFgGsp%w]")
INFO_CONDITIONS = {"Created", "Running", "Succeeded", "Suspended", "Resumed", "Complete"}
LOG_METHODS = {"Info", "Infof", "InfoS", "Infoln", "Warning", "Warningf", "WarningS",
               "Warn", "Warnf", "Error", "Errorf", "ErrorS", "Errorln", "Fatal", "Fatalf",
               "Debug", "Debugf", "Print", "Printf"}
LOGGERS = {"klog", "logrus", "log", "logger", "glog", "Log", "r.Log"}


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True,
                          capture_output=True).stdout.decode("utf-8", "replace")


class Tok:
    __slots__ = ("kind", "text", "line", "depth")

    def __init__(self, kind, text, line):
        self.kind, self.text, self.line, self.depth = kind, text, line, 0


def tokenize(text):
    toks, line = [], 1
    for m in TOKEN.finditer(text):
        kind = m.lastgroup
        if kind not in ("ws", "comment"):
            toks.append(Tok(kind, m.group(), line))
        line += m.group().count("\n")
    depth = 0
    for t in toks:
        if t.text in ")]}":
            depth -= 1
        t.depth = depth
        if t.text in "([{":
            depth += 1
    return toks


def decode(lit):
    if lit.startswith("`"):
        return lit[1:-1].replace("\r", "")
    body = lit[1:-1]
    return re.sub(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)",
                  lambda m: ESC.get(m.group(1), chr(int(m.group(1)[1:], 16))
                                    if m.group(1)[0] in "xuU" else chr(int(m.group(1), 8))
                                    if m.group(1)[0] in "01234567" else m.group(1)), body)


def matching(toks, i):
    """Index of the bracket closing the one at toks[i]."""
    d = toks[i].depth
    for j in range(i + 1, len(toks)):
        if toks[j].depth == d and toks[j].text in ")]}":
            return j
    return len(toks) - 1


def split_args(toks, i):
    """Arguments (lists of token indexes) of the call whose '(' is toks[i]."""
    end, args, cur = matching(toks, i), [], []
    for j in range(i + 1, end):
        if toks[j].depth == toks[i].depth + 1 and toks[j].text == ",":
            args.append(cur)
            cur = []
        else:
            cur.append(j)
    if cur:
        args.append(cur)
    return args, end


class Source:
    """One file: tokens, functions, string constants."""

    def __init__(self, prefix, path, text):
        self.prefix, self.path, self.toks = prefix, path, tokenize(text)
        self.funcs = []  # (start index, end index, receiver type)
        t = self.toks
        for i, tok in enumerate(t):
            if tok.text == "func" and tok.depth == 0:
                recv = ""
                if i + 1 < len(t) and t[i + 1].text == "(":
                    close = matching(t, i + 1)
                    ids = [x.text for x in t[i + 2:close] if x.kind == "id"]
                    recv = ids[-1] if ids else ""
                    name_i = close + 1
                else:
                    name_i = i + 1
                fname = t[name_i].text if name_i < len(t) and t[name_i].kind == "id" else ""
                j = i + 1
                while j < len(t) and not (t[j].text == "{" and t[j].depth == 0):
                    j += 1
                if j < len(t):
                    self.funcs.append((i, matching(t, j), recv, fname))

    def func_of(self, i, with_name=False):
        for s, e, recv, fname in self.funcs:
            if s <= i <= e:
                return (s, e, recv, fname) if with_name else (s, e, recv)
        return (0, len(self.toks) - 1, "", "") if with_name else (0, len(self.toks) - 1, "")


class Extractor:
    def __init__(self, consts, pkg_consts):
        self.global_consts = consts  # name -> value (unambiguous string constants)
        self.pkg_consts = pkg_consts  # directory -> name -> value
        self.consts = consts
        self.rows = []

    # ---- rendering ---------------------------------------------------------
    def render(self, src, idxs):
        """Render an expression as a format: literals, constants, %v for the rest."""
        t = src.toks
        parts, k = [], 0
        idxs = list(idxs)
        while k < len(idxs):
            tok = t[idxs[k]]
            if tok.kind in ("str", "raw"):
                parts.append(decode(tok.text))
                k += 1
            elif tok.text == "+" and tok.depth == t[idxs[0]].depth:
                k += 1
            elif tok.kind == "id":
                # a dotted name, possibly a call
                j = k
                name = [tok.text]
                while j + 2 < len(idxs) and t[idxs[j + 1]].text == "." and t[idxs[j + 2]].kind == "id":
                    name.append(t[idxs[j + 2]].text)
                    j += 2
                nxt = t[idxs[j + 1]] if j + 1 < len(idxs) else None
                if nxt is not None and nxt.text == "(":
                    close = matching(t, idxs[j + 1])
                    last = name[-1]
                    if last == "NewReason":
                        args, _ = split_args(t, idxs[j + 1])
                        parts.append("".join(self.render(src, a)[0] for a in args))
                    elif last in ("Sprintf", "Errorf") and name[0] == "fmt":
                        args, _ = split_args(t, idxs[j + 1])
                        parts.append(self.render(src, args[0])[0] if args else "%v")
                    elif last == "String" and len(name) == 1:
                        parts.append("%v")
                    else:
                        parts.append("%v")
                    while k < len(idxs) and idxs[k] <= close:
                        k += 1
                    continue
                if name[-1] in self.consts and not (nxt is not None and nxt.text in "[{"):
                    parts.append(self.consts[name[-1]])
                else:
                    parts.append("%v")
                k = j + 1
                # skip selectors/indexing that follow
                while k < len(idxs) and t[idxs[k]].text in "[(":
                    close = matching(t, idxs[k])
                    while k < len(idxs) and idxs[k] <= close:
                        k += 1
            else:
                # any other expression piece: one placeholder per run
                if not parts or parts[-1] != "%v":
                    parts.append("%v")
                if t[idxs[k]].text in "([{":
                    close = matching(t, idxs[k])
                    while k < len(idxs) and idxs[k] <= close:
                        k += 1
                else:
                    k += 1
        s = "".join(parts)
        literal = any(t[i].kind in ("str", "raw") for i in idxs) or \
            any(t[i].kind == "id" and t[i].text in self.consts for i in idxs)
        return s, literal

    def const_text(self, src, idxs):
        s, lit = self.render(src, idxs)
        return s if lit and "%v" not in s else None

    # ---- sinks -------------------------------------------------------------
    def event_how(self, src, name, args, type_i, reason_i):
        t = src.toks
        etype = "?"
        if type_i < len(args):
            txt = " ".join(t[i].text for i in args[type_i])
            etype = "Warning" if "Warning" in txt else "Normal" if "Normal" in txt else \
                (self.const_text(src, args[type_i]) or "?")
        reason = None
        if reason_i < len(args):
            r, lit = self.render(src, args[reason_i])
            if lit and r.replace("%v", ""):
                reason = r.replace("%v", "*")
        return "%s(%s%s)" % (name, etype, "," + reason if reason else "")

    def sink_of_call(self, src, i, args):
        """(how, message-argument index) when the call at toks[i] prints a message."""
        t = src.toks
        name = t[i].text
        chain = []
        j = i
        while j >= 2 and t[j - 1].text == "." and t[j - 2].kind in ("id",):
            chain.insert(0, t[j - 2].text)
            j -= 2
        if j >= 2 and t[j - 1].text == "." and t[j - 2].text == ")":
            # something like logger.V(2).Info: find the name before the V(...)
            open_i = None
            for k in range(j - 3, -1, -1):
                if t[k].depth == t[j - 2].depth and t[k].text == "(":
                    open_i = k
                    break
            if open_i is not None and t[open_i - 1].text == "V":
                k = open_i - 1
                while k >= 2 and t[k - 1].text == "." and t[k - 2].kind == "id":
                    chain.insert(0, t[k - 2].text)
                    k -= 2
                chain.append("V")
        if name in ("Event", "Eventf") and any(c.lower().endswith("recorder") or c == "Recorder"
                                                for c in chain):
            return self.event_how(src, name, args, 1, 2), 3
        if name == "recordContainerEvent":
            return self.event_how(src, "Eventf", args, 3, 4), 5
        if name == "logIt":
            return self.event_how(src, "Event", args, 1, 2), 4
        if name in ("UpdateJobConditions",):
            ct = self.const_text(src, args[1]) if len(args) > 1 else None
            return "condition(%s)" % (ct or "?"), 4
        if name == "updateMPIJobConditions":
            ct = self.const_text(src, args[1]) if len(args) > 1 else None
            return "condition(%s)" % (ct or "?"), 3
        if name in LOG_METHODS and i >= 1 and t[i - 1].text == "." and args:
            if name.startswith("Debug") or "V" in chain and name.startswith("Info"):
                return None, None  # debug and verbosity-gated (V(n)) info logs
            base = chain[0] if chain else "log"
            if base not in ("klog", "logrus", "glog"):
                base = "log"
            how = "%s.%s" % (base, name)
            if name.endswith("f") and name != "Fatal":
                return how, 0
            if name.endswith("ln") or base in ("logrus", "glog") or \
                    base == "klog" and name in ("Info", "Warning", "Error", "Fatal"):
                # fmt.Sprint-style arguments: the first literal one is the message
                for n, a in enumerate(args):
                    if any(t[x].kind in ("str", "raw") for x in a):
                        return how, n
                return how, 0
            # logr / klog structured: Error(err, msg, kv...), Info(msg, kv...)
            return how, (1 if name in ("Error", "ErrorS") else 0)
        if name == "HandleError" and chain and chain[-1] == "utilruntime":
            return "utilruntime.HandleError", 0
        return None, None

    # ---- main scan ---------------------------------------------------------
    def scan(self, src):
        local = self.pkg_consts.get((src.prefix, os.path.dirname(src.path)), {})
        self.consts = dict(self.global_consts, **local)
        t = src.toks
        for i, tok in enumerate(t):
            if tok.kind != "id" or i + 1 >= len(t) or t[i + 1].text != "(":
                continue
            if i >= 1 and t[i - 1].text == "func":
                continue
            _, _, recv = src.func_of(i)
            if recv.startswith("Fake"):
                continue
            prev = t[i - 2].text if i >= 2 and t[i - 1].text == "." else ""
            name = tok.text
            args, _ = split_args(t, i + 1)
            if prev == "fmt" and name in ("Errorf", "Sprintf") or prev == "errors" and name == "New":
                self.format_call(src, i, name if prev == "fmt" else "New", args)
                continue
            how, mi = self.sink_of_call(src, i, args)
            if how is None or mi is None or mi >= len(args):
                continue
            arg = args[mi]
            # a nested fmt.Sprintf/Errorf is reported by format_call; a variable is traced
            if len(arg) >= 3 and t[arg[0]].text == "fmt" and t[arg[2]].text in ("Sprintf", "Errorf"):
                continue
            if len(arg) == 1 and t[arg[0]].kind == "id" and t[arg[0]].text not in self.consts:
                continue
            fmt_s, lit = self.render(src, arg)
            if lit:
                self.add(src, tok.line, how, fmt_s)
        self.composite_messages(src)
        self.literal_vars(src)

    def literal_vars(self, src):
        """`msg := "literal"` inside a function, followed to the calls that print it."""
        t = src.toks
        for i, tok in enumerate(t):
            if tok.kind not in ("str", "raw") or i < 2 or t[i - 1].text not in ("=", ":=") \
                    or t[i - 2].kind != "id" or t[i - 3].text == ".":
                continue
            if i + 1 < len(t) and t[i + 1].line == tok.line and t[i + 1].text not in (";", "}"):
                continue
            fs, fe, recv = src.func_of(i)
            if fs == 0 and fe == len(t) - 1 or recv.startswith("Fake"):
                continue
            sinks = self.var_sinks(src, t[i - 2].text, i, i + 1, fe, t[i - 1].text == ":=")
            if sinks:
                self.add(src, tok.line, "+".join(dict.fromkeys(sinks)), decode(tok.text))

    def format_call(self, src, i, name, args):
        t = src.toks
        if not args:
            return
        fmt_s, lit = self.render(src, args[0])
        if not lit:
            return
        line = t[i].line
        if name == "New":
            # ErrX = errors.New("CamelCase"): a status reason
            if re.fullmatch(r"[A-Z][A-Za-z]+", fmt_s) and i >= 5 and t[i - 3].text == "=" \
                    and t[i - 4].text.startswith("Err"):
                self.add(src, line, "reason", fmt_s, reason=True)
                return
            self.add(src, line, "errors.New", fmt_s)
            return
        if name == "Errorf":
            self.add(src, line, "fmt.Errorf", fmt_s)
            return
        # Sprintf: where does the value go?
        sinks = self.sprintf_sinks(src, i)
        if sinks:
            self.add(src, line, "+".join(dict.fromkeys(sinks)), fmt_s)

    def enclosing_call(self, src, i):
        """(call name index, argument position) of the call whose argument contains toks[i]."""
        t = src.toks
        d = t[i].depth
        for k in range(i - 1, -1, -1):
            if t[k].depth < d and t[k].text in "([{":
                if t[k].text == "(" and k >= 1 and t[k - 1].kind == "id":
                    args, _ = split_args(t, k)
                    for pos, a in enumerate(args):
                        if a and a[0] <= i <= a[-1]:
                            return k - 1, pos
                return None, None
        return None, None

    def value_sinks(self, src, start, end, func_end):
        """Sinks of the value spanning toks[start..end]: the call it is an argument of,
        a return, a composite literal field, or (when assigned to a variable) the uses of
        that variable in the rest of the function."""
        t = src.toks
        out = []
        ci, pos = self.enclosing_call(src, start)
        if ci is not None:
            args, _ = split_args(t, ci + 1)
            how, mi = self.sink_of_call(src, ci, args)
            if how and mi == pos:
                out.append(how)
            elif t[ci].text == "New" and t[ci - 2].text == "errors":
                out.append("errors.New")
            elif t[ci].text == "append" and pos == 1 and "warning" in t[args[0][0]].text.lower():
                out.append("admission warning")
            elif t[ci].text in ("Invalid", "Required", "Forbidden", "NotSupported") \
                    and t[ci - 2].text == "field":
                out.append("field.%s" % t[ci].text)
            return out
        # statement context
        k = start - 1
        if t[k].text == "return" or t[k].text == "," and self.in_return(src, k):
            return self.return_how(src, start)
        if t[k].text == ":" and t[k - 1].kind == "id":
            fld = t[k - 1].text
            if fld in ("Message", "message"):
                out.append(self.composite_how(src, k - 1))
            return out
        if t[k].text in ("=", ":=") and t[k - 1].kind == "id":
            out.extend(self.var_sinks(src, t[k - 1].text, start, end + 1, func_end,
                                      t[k].text == ":="))
        return out

    def return_how(self, src, i):
        """how of a value returned by the function containing toks[i]: Recv.Error() for an
        error's message, nothing for a String() method, else fmt.Sprintf(return)."""
        _, _, recv, name = src.func_of(i, with_name=True)
        if name == "String":
            return []
        if name == "Error":
            return ["%s.Error()" % recv if recv else "Error()"]
        return ["fmt.Sprintf(return)"]

    def in_return(self, src, k):
        t = src.toks
        d = t[k].depth
        for j in range(k, -1, -1):
            if t[j].depth == d and t[j].text in (";", "{", "}") or t[j].line < t[k].line - 3:
                return False
            if t[j].text == "return" and t[j].depth == d:
                return True
        return False

    def block_of(self, src, i):
        """Index of the '{' of the innermost block containing toks[i] (-1: file level)."""
        t = src.toks
        d = t[i].depth
        for k in range(i - 1, -1, -1):
            if t[k].depth < d and t[k].text in "([{":
                if t[k].text == "{":
                    return k
                d = t[k].depth
        return -1

    def var_sinks(self, src, var, decl, start, func_end, short):
        """Sinks of variable `var` assigned at toks[decl]: its uses up to the end of its
        block (`:=`) or of the function (`=`). A later assignment to it in the same block
        ends the search, one in another block hides that block; `v = f(..., v)` goes on."""
        t = src.toks
        out = []
        home = self.block_of(src, decl)
        stop = matching(t, home) if short and home >= 0 else func_end
        j = start
        while j <= min(stop, func_end):
            if t[j].kind != "id" or t[j].text != var or (j >= 1 and t[j - 1].text == "."):
                j += 1
                continue
            if j + 1 < len(t) and t[j + 1].text in ("=", ":="):
                # the statement's right-hand side: up to the end of its line
                rhs_end = j + 2
                while rhs_end < len(t) and (t[rhs_end].line == t[j].line or
                                            t[rhs_end].depth > t[j].depth):
                    rhs_end += 1
                if any(t[x].text == var for x in range(j + 2, rhs_end)):
                    j = rhs_end
                    continue
                blk = self.block_of(src, j)
                if blk == home or t[j + 1].text == ":=" and blk == home:
                    break
                j = matching(t, blk) + 1 if blk >= 0 else j + 1
                continue
            ci, pos = self.enclosing_call(src, j)
            if ci is not None:
                args, _ = split_args(t, ci + 1)
                arg = args[pos] if pos is not None and pos < len(args) else []
                if len(arg) == 1:
                    how, mi = self.sink_of_call(src, ci, args)
                    if how and mi == pos:
                        out.append(how)
                    elif t[ci].text == "New" and t[ci - 2].text == "errors":
                        out.append("errors.New")
                j += 1
                continue
            k = j - 1
            if t[k].text == "return" or t[k].text == "," and self.in_return(src, k):
                out.extend(self.return_how(src, j))
            elif t[k].text == ":" and t[k - 1].text in ("Message", "message"):
                out.append(self.composite_how(src, k - 1))
            j += 1
        return out

    def sprintf_sinks(self, src, i):
        t = src.toks
        close = matching(t, i + 1)
        start = i - 2  # the `fmt` token
        _, fend, _ = src.func_of(i)
        return self.value_sinks(src, start, close, fend)

    def composite_how(self, src, key_i):
        """how for a `Message:` field: condition(TYPE) or status(REASON) or Killing event."""
        t = src.toks
        d = t[key_i].depth
        open_i = None
        for k in range(key_i - 1, -1, -1):
            if t[k].depth < d and t[k].text == "{":
                open_i = k
                break
        if open_i is None:
            return "message"
        tname = t[open_i - 1].text if open_i >= 1 else ""
        fields = {}
        close = matching(t, open_i)
        k = open_i + 1
        while k < close:
            if t[k].depth == d and t[k].kind == "id" and t[k + 1].text == ":":
                e = k + 2
                while e < close and not (t[e].depth == d and t[e].text == ","):
                    e += 1
                fields[t[k].text] = list(range(k + 2, e))
                k = e
            k += 1
        if tname == "containerToKillInfo":
            return "Eventf(Normal,Killing)"
        if "Condition" in tname or "Type" in fields and "Reason" in fields and "Status" in fields:
            ct = self.const_text(src, fields["Type"]) if "Type" in fields else None
            return "condition(%s)" % (ct or "?")
        reason = self.const_text(src, fields["Reason"]) if "Reason" in fields else None
        return "status(%s)" % reason if reason else "status"

    def composite_messages(self, src):
        """Literal `Message: "..."` fields (PodAdmitResult, conditions)."""
        t = src.toks
        for k in range(1, len(t) - 2):
            if t[k].text in ("Message", "message") and t[k + 1].text == ":" and \
                    t[k - 1].text in ("{", ","):
                e = k + 2
                while e < len(t) and not (t[e].depth == t[k].depth and t[e].text in (",", "}")):
                    e += 1
                idxs = list(range(k + 2, e))
                if not idxs or t[idxs[0]].text == "fmt":
                    continue
                if len(idxs) == 1 and t[idxs[0]].kind == "id" and t[idxs[0]].text not in self.consts:
                    continue
                fmt_s, lit = self.render(src, idxs)
                if lit and "%v" not in fmt_s:
                    self.add(src, t[k].line, self.composite_how(src, k), fmt_s)

    def add(self, src, line, how, fmt_s, reason=False):
        self.rows.append((src.prefix + ":" + src.path, line, how, fmt_s, reason))


def string_consts(toks):
    """name -> literal value for `Name = "..."` / `Name Type = "..."` (single literal)."""
    out = {}
    for i, tok in enumerate(toks):
        if tok.kind in ("str", "raw") and i >= 2 and toks[i - 1].text == "=" and \
                (i + 1 >= len(toks) or toks[i + 1].line != tok.line or toks[i + 1].text in (")", ";")):
            j = i - 2
            if toks[j].kind == "id" and j >= 1 and toks[j - 1].kind == "id" and \
                    toks[j - 1].line == tok.line and toks[j - 1].text not in ("const", "var"):
                j -= 1  # `Name Type = "..."`
            if toks[j].kind == "id" and toks[j].line == tok.line and \
                    (j == 0 or toks[j - 1].line != tok.line or toks[j - 1].text in ("const", "var")):
                out.setdefault(toks[j].text, set()).add(decode(tok.text))
    return out


def keep(row):
    path, line, how, fmt_s, reason = row
    if reason:
        return True
    literal = VERB.sub(" ", fmt_s)
    words = len(re.findall(r"[A-Za-z][A-Za-z'-]*", literal))
    # an event's reason is printed with its message (kubectl describe: "Warning  Unhealthy  ...")
    m = re.search(r"Eventf?\((?:Warning|Normal),([A-Za-z*]+)\)", how)
    if m:
        words += 1
    if words < 3:
        return False
    if not path.startswith(("kubeflow:", "k8s:")):
        return False  # container runtimes: only their status reasons
    sinks = how.split("+")
    serious = False
    for s in sinks:
        if s.startswith(("fmt.Errorf", "errors.New", "utilruntime", "field.", "admission")):
            serious = True
        elif s.startswith(("Event(Warning", "Eventf(Warning")):
            serious = True
        elif re.match(r"(klog|log|logrus|glog)\.(Error|Warn|Fatal)", s):
            serious = True
        elif s.startswith("condition("):
            ctype = s[len("condition("):-1]
            if ctype not in INFO_CONDITIONS:
                serious = True
        elif s.startswith("status("):
            serious = True
        elif s in ("Unschedulable reason", "initContainer echo") or s.endswith("Error()"):
            serious = True
    if serious:
        return True
    if re.search(r"successful|succeeded", literal, re.I):
        return False
    return bool(FAILURE.search(literal))


def escape(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def special_rows(sources):
    """Rows that are not calls: scheduler filter reasons, status reason constants,
    the PyTorch init container's echo."""
    rows = []
    for src in sources:
        t = src.toks
        p = src.prefix + ":" + src.path
        if src.path.endswith("noderesources/fit.go"):
            for tok in t:
                if tok.kind == "str" and re.match(r'"(Insufficient |Too many pods)', tok.text):
                    rows.append((p, tok.line, "Unschedulable reason", decode(tok.text), True))
        for i, tok in enumerate(t):
            if tok.kind == "str" and i >= 2 and t[i - 1].text == "=":
                name = t[i - 2].text
                val = decode(tok.text)
                if src.prefix in ("containerd", "cri-dockerd") and name in (
                        "errorStartReason", "completeExitReason", "errorExitReason",
                        "oomExitReason", "reason"):
                    rows.append((p, tok.line, "reason", val, True))
                elif src.path.endswith("eviction/helpers.go") and name == "Reason":
                    rows.append((p, tok.line, "reason", val, True))
                elif src.path.endswith("active_deadline.go") and name == "reason":
                    rows.append((p, tok.line, "reason", val, True))
                elif src.path.endswith("eviction/helpers.go") and name.endswith("MessageFmt"):
                    rows.append((p, tok.line, "status(Evicted)", val, False))
                elif src.path.endswith("lifecycle/predicate.go") and name.startswith("OutOf"):
                    rows.append((p, tok.line, "reason", val, True))
            if src.path.endswith("lifecycle/predicate.go") and tok.text == "reason" and \
                    i + 4 < len(t) and t[i + 1].text == "=" and t[i + 2].text == "fmt":
                rows.append((p, tok.line, "reason", "OutOf%s", True))
            if tok.kind == "raw" and "echo " in tok.text and src.prefix == "kubeflow":
                for m in re.finditer(r"echo ([^;']+);", tok.text):
                    line = tok.line + tok.text[:m.start()].count("\n")
                    rows.append((p, line, "initContainer echo", m.group(1).strip(), False))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeflow-git-dir", required=True)
    ap.add_argument("--kubeflow-rev", default="release-1.9")
    ap.add_argument("--k8s-dir", required=True,
                    help="copies of the K8S_FILES laid out as REPO/PATH")
    a = ap.parse_args()

    commit = git(a.kubeflow_git_dir, "rev-parse", a.kubeflow_rev + "^{commit}").strip()
    describe = git(a.kubeflow_git_dir, "describe", "--tags", commit).strip()
    all_go = [p for p in git(a.kubeflow_git_dir, "ls-tree", "-r", "--name-only", commit,
                             "--", "pkg").splitlines() if p.endswith(".go")]
    kf_sources, consts, pkg_consts = [], {}, {}
    for p in all_go:
        text = git(a.kubeflow_git_dir, "show", "%s:%s" % (commit, p))
        toks = tokenize(text)
        for k, v in string_consts(toks).items():
            consts.setdefault(k, set()).update(v)
            if len(v) == 1:
                pkg_consts.setdefault(("kubeflow", os.path.dirname(p)), {})[k] = next(iter(v))
        if p.endswith("_test.go") or "zz_generated" in p or p.startswith(("pkg/client/", "pkg/apis/")) \
                or re.search(r"/(testutil|testing)/", p) or "/util.v2/testing" in p:
            continue
        src = Source("kubeflow", p, text)
        kf_sources.append(src)

    k8s_sources = []
    for prefix, repo, path, kcommit, nlines in K8S_FILES:
        fn = os.path.join(a.k8s_dir, repo, path)
        with open(fn, encoding="utf-8") as f:
            lines = f.read().split("\n")
        if nlines is not None:
            if len(lines) < nlines:
                sys.exit("%s: %d lines, K8S_FILES reads %d" % (fn, len(lines), nlines))
            lines = lines[:nlines]
        text = "\n".join(lines)
        src = Source(prefix, path, text)
        k8s_sources.append(src)
        for k, v in string_consts(src.toks).items():
            consts.setdefault(k, set()).update(v)
            if len(v) == 1:
                pkg_consts.setdefault((prefix, os.path.dirname(path)), {})[k] = next(iter(v))

    unambiguous = {k: next(iter(v)) for k, v in consts.items() if len(v) == 1}
    ex = Extractor(unambiguous, pkg_consts)
    for src in kf_sources + k8s_sources:
        ex.scan(src)
    rows = ex.rows + special_rows(kf_sources + k8s_sources)

    seen, out_rows = set(), []
    for r in rows:
        key = (r[0], r[1], r[3])
        if key in seen or not keep(r):
            continue
        seen.add(key)
        out_rows.append(r)
    out_rows.sort(key=lambda r: (r[0], r[1], r[3]))

    out = sys.stdout
    out.write("# Kubernetes mixed ; Kubeflow-training-operator %s %s (branch %s)\n"
              % (describe, commit, a.kubeflow_rev))
    head = git(a.kubeflow_git_dir, "rev-parse", "HEAD").strip()
    head_note = ""
    if head != commit:
        head_note = (" (the snapshot's HEAD %s, `git describe` %s, is master after the v1 "
                     "controllers were removed: Trainer v2 only)" % (
                         head[:12], git(a.kubeflow_git_dir, "describe", "--tags", head).strip()))
    out.write("# note: kubeflow: = kubeflow/training-operator pkg/ at %s (%s)%s; k8s:/containerd:/"
              "cri-dockerd: = single files, one stored version each, at differing commits "
              "(Kubernetes ~1.4 to ~1.35), [1-N] = the lines read: %s\n" % (
                  commit[:12], describe, head_note,
                  ", ".join("%s/%s@%s%s" % (repo, path, kc[:12],
                                            "[1-%d]" % n if n else "")
                            for _, repo, path, kc, n in K8S_FILES)))
    out.write("path\tline\thow\tformat\n")
    for path, line, how, fmt_s, _ in out_rows:
        out.write("%s\t%d\t%s\t%s\n" % (path, line, how, escape(fmt_s)))


if __name__ == "__main__":
    main()
