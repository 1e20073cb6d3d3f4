/* pt_build.c: operations that add nodes to a CallTree: child, walk, inserting many
 * paths at once, folding one tree into another (and mapping its nodes onto another's).
 *
 * Each works in three steps: (1) find or make the nodes, new ones kept in C memory
 * (pt_nodes) and in the index at once; (2) append them to the columns and link them
 * (pt_tree_commit); (3) add costs, in the order the Python model added them (node
 * creation order and float sums are the same as CallTree's pure-Python methods had). */
#include "pt_core.h"

#include <stdlib.h>
#include <string.h>

/* A node id argument checked against the tree's size.  Not async-signal-safe. */
int pt_check_node(long long node, Py_ssize_t n, const char *what) {
    if (node < 0 || node >= n) {
        PyErr_Format(PyExc_IndexError, "%s %lld is not a node of the tree (%zd nodes)", what,
                     node, n);
        return -1;
    }
    return 0;
}

/* A frame id that fits the frames column.  Not async-signal-safe. */
static int pt_check_frame(long long frame) {
    if (frame < INT32_MIN || frame > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "frame id %lld does not fit the frames column",
                     frame);
        return -1;
    }
    return 0;
}

/* child(tree, node, frame) -> the child, made when absent.  Not async-signal-safe. */
PyObject *pt_py_child(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    long long node, frame;
    if (!PyArg_ParseTuple(args, "OLL:child", &obj, &node, &frame))
        return NULL;
    pt_tree t;
    pt_nodes n;
    if (pt_check_frame(frame) < 0 || pt_tree_open(&t, obj, 1) < 0)
        return NULL;
    if (pt_tree_read(&t, &n) < 0) {
        pt_tree_close(&t);
        return NULL;
    }
    Py_ssize_t id = -1;
    int made = 0;
    if (pt_check_node(node, n.n0, "node") == 0)
        id = pt_child_of(t.index, &n, (int32_t)node, (int32_t)frame, 0, &made);
    pt_tree_unread(&t);
    if (id >= 0 && made && pt_tree_commit(&t, &n, NULL) < 0)
        id = -1;
    pt_nodes_free(&n);
    pt_tree_close(&t);
    return id < 0 ? NULL : PyLong_FromSsize_t(id);
}

/* find(tree, node, frame) -> the child, or -1.  Not async-signal-safe. */
PyObject *pt_py_find(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    long long node, frame;
    if (!PyArg_ParseTuple(args, "OLL:find", &obj, &node, &frame))
        return NULL;
    if (frame < INT32_MIN || frame > INT32_MAX || node < INT32_MIN || node > INT32_MAX)
        return PyLong_FromLong(-1);
    pt_tree t;
    pt_nodes n;
    if (pt_tree_open(&t, obj, 1) < 0)
        return NULL;
    if (pt_tree_read(&t, &n) < 0) {
        pt_tree_close(&t);
        return NULL;
    }
    Py_ssize_t id = pt_index_find(t.index, &n, (int32_t)node, (int32_t)frame);
    pt_tree_close(&t);
    return PyLong_FromSsize_t(id);
}

/* walk(tree, frames, at) -> the node at `frames` (outermost first) below `at`, made as
 * needed.  Not async-signal-safe. */
PyObject *pt_py_walk(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *frames;
    long long at;
    if (!PyArg_ParseTuple(args, "OOL:walk", &obj, &frames, &at))
        return NULL;
    pt_ints path;
    if (pt_ints_get(&path, frames, "walk: frames") < 0)
        return NULL;
    pt_tree t;
    pt_nodes n;
    if (pt_tree_open(&t, obj, 1) < 0) {
        pt_ints_free(&path);
        return NULL;
    }
    if (pt_tree_read(&t, &n) < 0) {
        pt_tree_close(&t);
        pt_ints_free(&path);
        return NULL;
    }
    Py_ssize_t node = -1;
    int made = 0, any = 0;
    if (pt_check_node(at, n.n0, "at") == 0) {
        node = (Py_ssize_t)at;
        for (Py_ssize_t i = 0; i < path.len && node >= 0; i++) {
            if (pt_check_frame(path.items[i]) < 0) {
                node = -1;
                break;
            }
            node = pt_child_of(t.index, &n, (int32_t)node, (int32_t)path.items[i], made, &made);
            any |= made;
        }
    }
    pt_tree_unread(&t);
    if (any && pt_tree_commit(&t, &n, NULL) < 0)
        node = -1;
    pt_nodes_free(&n);
    pt_tree_close(&t);
    pt_ints_free(&path);
    return node < 0 ? NULL : PyLong_FromSsize_t(node);
}

/* insert_paths(tree, paths, offsets, outer, group_of, groups) -> array('i') of leaves.
 *
 * Path s is paths[offsets[s]:offsets[s + 1]] (frame ids, outermost first, from the
 * root), inserted in order.  With `outer` (a bytearray, one flag per node) each new
 * node's flag says whether no ancestor is of its function group (group_of[frame], below
 * `groups`): what StackProfile's per-function totals need.  Not async-signal-safe. */
PyObject *pt_py_insert_paths(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *paths_obj, *offsets_obj, *outer, *group_obj;
    Py_ssize_t groups;
    if (!PyArg_ParseTuple(args, "OOOOOn:insert_paths", &obj, &paths_obj, &offsets_obj, &outer,
                          &group_obj, &groups))
        return NULL;
    pt_col paths = {0}, offsets = {0};
    pt_ints group_of = {0};
    pt_tree t;
    pt_nodes n = {0};
    int32_t *leaves = NULL;
    int64_t *stamps = NULL;
    PyObject *result = NULL;
    int opened = 0, keep_outer = outer != Py_None;
    if (pt_col_get(&paths, paths_obj, PT_I32, 0, "paths") < 0 ||
        pt_col_get(&offsets, offsets_obj, PT_I64, 0, "offsets") < 0)
        goto done;
    if (keep_outer && (pt_ints_get(&group_of, group_obj, "group_of") < 0))
        goto done;
    Py_ssize_t count = offsets.len - 1;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "insert_paths: offsets needs a first entry");
        goto done;
    }
    const int64_t *off = PT_I64P(&offsets);
    const int32_t *frames = PT_I32P(&paths);
    for (Py_ssize_t s = 0; s < count; s++)
        if (off[s] < 0 || off[s] > off[s + 1] || off[s + 1] > paths.len) {
            PyErr_Format(PyExc_ValueError, "insert_paths: bad offsets at path %zd", s);
            goto done;
        }
    if (pt_tree_open(&t, obj, 1) < 0)
        goto done;
    opened = 1;
    if (pt_tree_read(&t, &n) < 0)
        goto done;
    n.keep_outer = keep_outer;
    if (keep_outer) {
        Py_ssize_t have = PySequence_Size(outer);
        if (have != n.n0) {
            if (have >= 0)
                PyErr_Format(PyExc_ValueError, "insert_paths: outer has %zd flags for %zd nodes",
                             have, n.n0);
            goto unread;
        }
        stamps = calloc((size_t)(groups > 0 ? groups : 1), sizeof(int64_t));
        if (stamps == NULL) {
            PyErr_NoMemory();
            goto unread;
        }
    }
    leaves = malloc(sizeof(int32_t) * (size_t)(count ? count : 1));
    if (leaves == NULL) {
        PyErr_NoMemory();
        goto unread;
    }
    for (Py_ssize_t s = 0; s < count; s++) {
        Py_ssize_t node = 0;
        int made = 0;
        for (int64_t j = off[s]; j < off[s + 1]; j++) {
            int32_t frame = frames[j];
            node = pt_child_of(t.index, &n, (int32_t)node, frame, made, &made);
            if (node < 0)
                goto unread;
            if (keep_outer) {
                int64_t g = frame >= 0 && frame < group_of.len ? group_of.items[frame] : -1;
                if (g < 0 || g >= groups) {
                    PyErr_Format(PyExc_IndexError, "insert_paths: frame %d has no group", frame);
                    goto unread;
                }
                if (made)
                    n.new_outer[node - n.n0] = stamps[g] != s + 1;
                stamps[g] = s + 1;
            }
        }
        leaves[s] = (int32_t)node;
    }
    pt_tree_unread(&t);
    if (pt_tree_commit(&t, &n, keep_outer ? outer : NULL) < 0)
        goto done;
    result = pt_array_new(PT_I32, leaves, count);
    goto done;
unread:
    pt_tree_unread(&t);
done:
    if (opened)
        pt_tree_close(&t);
    pt_nodes_free(&n);
    pt_col_release(&paths);
    pt_col_release(&offsets);
    pt_ints_free(&group_of);
    free(leaves);
    free(stamps);
    return result;
}

/* A pair stack (or list) of node ids.  Not async-signal-safe (malloc). */
int pt_push2(pt_vec *v, int32_t a, int32_t b) {
    return pt_vec_push(v, a) < 0 || pt_vec_push(v, b) < 0 ? -1 : 0;
}

/* The (i, j) metric pairs of a fold: this tree's metric i gets the other's j.
 * Not async-signal-safe. */
static int pt_metric_pairs(PyObject *pairs, Py_ssize_t mine, Py_ssize_t theirs, pt_ints *out) {
    PyObject *seq = PySequence_Fast(pairs, "metric pairs");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Size(seq);
    out->items = malloc(sizeof(int64_t) * (size_t)(2 * n + 1));
    out->len = 0;
    if (out->items == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *pair = PySequence_GetItem(seq, k);
        long long i, j;
        int ok = pair != NULL && PyArg_ParseTuple(pair, "LL", &i, &j);
        Py_XDECREF(pair);
        if (!ok)
            goto fail;
        if (i < 0 || i >= mine || j < 0 || j >= theirs) {
            PyErr_SetString(PyExc_IndexError, "fold: metric pair out of range");
            goto fail;
        }
        out->items[out->len++] = i;
        out->items[out->len++] = j;
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    pt_ints_free(out);
    return -1;
}

/* Borrow column `m` of a list of columns.  Not async-signal-safe. */
int pt_list_col(pt_col *col, PyObject *list, Py_ssize_t m, int writable, const char *w) {
    PyObject *item = PyList_GetItem(list, m);
    if (item == NULL)
        return -1;
    return pt_col_get(col, item, PT_F64, writable, w);
}

/* fold(tree, node, other, other_nodes, sign, frame_map, metric_pairs): CallTree.fold of
 * each of `other_nodes` in turn into `node`.
 *
 * Walks `other` below each other node in lockstep with this tree below `node` (a stack
 * of pairs: the last child is visited first), making the nodes this tree lacks (frame
 * ids through `frame_map` unless None); then adds, pair by pair in visiting order,
 * `sign` times each non-zero self cost (metric pairs (i, j): this tree's i gets other's
 * j) and the call counts as CallTree.fold documents.  Totals are left to finalize.
 * Not async-signal-safe. */
PyObject *pt_py_fold(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *other_obj, *starts_obj, *map_obj, *pairs_obj;
    long long node;
    double sign;
    if (!PyArg_ParseTuple(args, "OLOOdOO:fold", &obj, &node, &other_obj, &starts_obj, &sign,
                          &map_obj, &pairs_obj))
        return NULL;
    if (obj == other_obj) {
        PyErr_SetString(PyExc_ValueError, "fold: a tree cannot fold itself (copy it first)");
        return NULL;
    }
    pt_tree t, o;
    pt_nodes n = {0}, on = {0};
    pt_ints map = {0}, pairs = {0}, starts = {0};
    pt_vec stack = {0}, order = {0};
    pt_col ofirst = {0}, onext = {0};
    int opened = 0, oopened = 0, ok = 0;
    if (pt_ints_get(&starts, starts_obj, "other_nodes") < 0)
        return NULL;
    if (map_obj != Py_None && pt_ints_get(&map, map_obj, "frame_map") < 0)
        goto done;
    if (pt_tree_open(&t, obj, 1) < 0)
        goto done;
    opened = 1;
    if (pt_tree_open(&o, other_obj, 0) < 0)
        goto done;
    oopened = 1;
    if (pt_metric_pairs(pairs_obj, t.n_metrics, o.n_metrics, &pairs) < 0 ||
        pt_tree_need_links(&o) < 0 || (o.calls != NULL && pt_tree_need_calls(&t) < 0))
        goto done;
    if (pt_tree_read(&t, &n) < 0)
        goto done;
    if (pt_tree_read(&o, &on) < 0) {
        pt_tree_unread(&t);
        goto done;
    }
    if (pt_col_get(&ofirst, o.first, PT_I32, 0, "first_child") < 0 ||
        pt_col_get(&onext, o.next, PT_I32, 0, "next_sibling") < 0 ||
        pt_check_node(node, n.n0, "node") < 0)
        goto unread;
    for (Py_ssize_t k = 0; k < starts.len; k++)
        if (pt_check_node(starts.items[k], on.n0, "other node") < 0)
            goto unread;
    const int32_t *first = PT_I32P(&ofirst), *next = PT_I32P(&onext), *oframes = on.frames;
    /* The walk touches C memory and borrowed buffers only: other threads (the UI) run
     * meanwhile.  A frame outside frame_map, or mapped outside int32, is raised after. */
    int failed = 0, why = 0; /* why: 1 a frame not in frame_map, 2 one mapped too wide */
    long long bad_frame = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; !failed && k < starts.len; k++) {
        if (pt_push2(&stack, (int32_t)node, (int32_t)starts.items[k]) < 0) {
            failed = 1;
            break;
        }
        while (!failed && stack.len) {
            int32_t theirs = stack.items[--stack.len], mine = stack.items[--stack.len];
            if (pt_push2(&order, mine, theirs) < 0) {
                failed = 1;
                break;
            }
            for (int32_t c = first[theirs]; c >= 0; c = next[c]) {
                int64_t frame = oframes[c];
                if (map.items != NULL) {
                    if (frame < 0 || frame >= map.len) {
                        bad_frame = frame, why = 1, failed = 1;
                        break;
                    }
                    frame = map.items[frame];
                    if (frame < INT32_MIN || frame > INT32_MAX) {
                        bad_frame = frame, why = 2, failed = 1;
                        break;
                    }
                }
                int made;
                Py_ssize_t id = pt_child_of(t.index, &n, mine, (int32_t)frame, 0, &made);
                if (id < 0 || pt_push2(&stack, (int32_t)id, c) < 0) {
                    failed = 1;
                    break;
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (why == 1)
        PyErr_Format(PyExc_IndexError, "fold: frame %lld is not in frame_map", bad_frame);
    else if (why == 2)
        (void)pt_check_frame(bad_frame);
    if (failed)
        goto unread;
    pt_col_release(&ofirst);
    pt_col_release(&onext);
    pt_tree_unread(&o);
    pt_tree_unread(&t);
    if (pt_tree_commit(&t, &n, NULL) < 0)
        goto done;
    /* Costs, pair by pair in visiting order. */
    Py_ssize_t np = pairs.len / 2;
    pt_col cols[64], ocols[64], calls = {0}, ocalls = {0};
    if (np > 64) {
        PyErr_SetString(PyExc_ValueError, "fold: too many metrics");
        goto done;
    }
    Py_ssize_t got = 0;
    int bad = 0;
    for (; got < np; got++) {
        if (pt_list_col(&cols[got], t.selfs, pairs.items[2 * got], 1, "selfs") < 0) {
            bad = 1;
            break;
        }
        if (pt_list_col(&ocols[got], o.selfs, pairs.items[2 * got + 1], 0, "other selfs") < 0) {
            pt_col_release(&cols[got]);
            bad = 1;
            break;
        }
    }
    int with_calls = o.calls != NULL; /* else every count of `other` is unknown */
    if (!bad && with_calls &&
        (pt_col_get(&calls, t.calls, PT_I64, 1, "calls") < 0 ||
         pt_col_get(&ocalls, o.calls, PT_I64, 0, "other calls") < 0))
        bad = 1;
    if (!bad) {
        int64_t *mc = PT_I64P(&calls);
        const int64_t *oc = PT_I64P(&ocalls);
        for (Py_ssize_t p = 0; p < order.len; p += 2) {
            int32_t mine = order.items[p], theirs = order.items[p + 1];
            for (Py_ssize_t k = 0; k < np; k++) {
                double value = PT_F64P(&ocols[k])[theirs];
                if (value != 0.0)
                    PT_F64P(&cols[k])[mine] += sign * value;
            }
            if (!with_calls)
                continue;
            int64_t count = oc[theirs];
            if (count >= 0 && theirs != 0 && (sign > 0 || mc[mine] >= 0)) {
                int64_t add = (int64_t)(sign * (double)count);
                mc[mine] = mc[mine] < 0 ? add : mc[mine] + add;
            }
        }
        ok = 1;
    }
    for (Py_ssize_t k = 0; k < got; k++) {
        pt_col_release(&cols[k]);
        pt_col_release(&ocols[k]);
    }
    pt_col_release(&calls);
    pt_col_release(&ocalls);
    goto done;
unread:
    pt_col_release(&ofirst);
    pt_col_release(&onext);
    pt_tree_unread(&o);
    pt_tree_unread(&t);
done:
    if (oopened)
        pt_tree_close(&o);
    if (opened)
        pt_tree_close(&t);
    pt_nodes_free(&n);
    pt_ints_free(&map);
    pt_ints_free(&pairs);
    pt_ints_free(&starts);
    pt_vec_free(&stack);
    pt_vec_free(&order);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

/* node_map(tree, into, frame_map) -> array('q'): for each node of `tree`, the node of
 * `into` at the same path (frames mapped through `frame_map` unless None), -1 where
 * `into` has none.  Not async-signal-safe. */
PyObject *pt_py_node_map(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *into_obj, *map_obj;
    if (!PyArg_ParseTuple(args, "OOO:node_map", &obj, &into_obj, &map_obj))
        return NULL;
    pt_tree t, into;
    pt_nodes n, in;
    pt_ints map = {0};
    int64_t *out = NULL;
    PyObject *result = NULL;
    if (map_obj != Py_None && pt_ints_get(&map, map_obj, "frame_map") < 0)
        return NULL;
    if (pt_tree_open(&t, obj, 0) < 0) {
        pt_ints_free(&map);
        return NULL;
    }
    if (pt_tree_open(&into, into_obj, 1) < 0) {
        pt_tree_close(&t);
        pt_ints_free(&map);
        return NULL;
    }
    if (pt_tree_read(&t, &n) < 0)
        goto close;
    if (pt_tree_read(&into, &in) < 0)
        goto close;
    out = malloc(sizeof(int64_t) * (size_t)n.n0);
    if (out == NULL) {
        PyErr_NoMemory();
        goto close;
    }
    out[0] = 0;
    for (Py_ssize_t i = 1; i < n.n0; i++) {
        int32_t p = n.parents[i];
        if (p < 0 || p >= i) {
            PyErr_Format(PyExc_ValueError, "node %zd: parent %d is not an earlier node", i, p);
            goto close;
        }
        int64_t frame = n.frames[i], up = out[p];
        if (map.items != NULL) {
            if (frame < 0 || frame >= map.len) {
                PyErr_Format(PyExc_IndexError, "node_map: frame %lld is not in frame_map",
                             (long long)frame);
                goto close;
            }
            frame = map.items[frame];
        }
        out[i] = up < 0 || frame < INT32_MIN || frame > INT32_MAX
                     ? -1
                     : pt_index_find(into.index, &in, (int32_t)up, (int32_t)frame);
    }
    result = pt_array_new(PT_I64, out, n.n0);
close:
    pt_tree_close(&into);
    pt_tree_close(&t);
    pt_ints_free(&map);
    free(out);
    return result;
}
