/* pt_sums.c: sums over a CallTree's columns: totals, sibling links, per-function sums
 * (recursion counted once) and adding a count change along a path.  Sums are done in
 * the order the Python model did them (node id order), so results are bit-identical. */
#include "pt_core.h"

#include <stdlib.h>
#include <string.h>

/* The totals of one self column: self plus the children's totals, one reverse pass
 * (parents come before children).  `total` starts as a copy of the selfs.  0, or -1
 * when a parent is not an earlier node.  Not async-signal-safe (sets an exception). */
static int pt_sum_up(double *total, const int32_t *parents, Py_ssize_t n) {
    for (Py_ssize_t i = n - 1; i > 0; i--) {
        int32_t p = parents[i];
        if (p < 0 || p >= i) {
            PyErr_Format(PyExc_ValueError, "node %zd: parent %d is not an earlier node", i, p);
            return -1;
        }
        double value = total[i];
        if (value != 0.0)
            total[p] += value;
    }
    return 0;
}

/* totals(tree) -> [array('d') per metric]: each node's self plus its children's totals,
 * summed in place in the new column (no second copy of it: a deep tree's columns are
 * tens of MB).  Not async-signal-safe. */
PyObject *pt_py_totals(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "O:totals", &obj))
        return NULL;
    pt_tree t;
    if (pt_tree_open(&t, obj, 0) < 0)
        return NULL;
    pt_col parents;
    PyObject *out = NULL;
    if (pt_col_get(&parents, t.parents, PT_I32, 0, "parents") < 0)
        goto close;
    Py_ssize_t n = parents.len;
    out = PyList_New(0);
    for (Py_ssize_t m = 0; out != NULL && m < t.n_metrics; m++) {
        pt_col col, sums;
        if (pt_col_get(&col, PyList_GetItem(t.selfs, m), PT_F64, 0, "selfs") < 0) {
            Py_CLEAR(out);
            break;
        }
        PyObject *column = NULL;
        if (col.len != n)
            PyErr_SetString(PyExc_ValueError, "CallTree: a self column differs in length");
        else
            column = pt_array_new(PT_F64, col.data, n);
        pt_col_release(&col);
        int ok = column != NULL && pt_col_get(&sums, column, PT_F64, 1, "totals") == 0;
        if (ok) {
            ok = pt_sum_up(PT_F64P(&sums), PT_I32P(&parents), n) == 0;
            pt_col_release(&sums);
        }
        if (!ok || PyList_Append(out, column) < 0) {
            Py_XDECREF(column);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(column);
    }
    pt_col_release(&parents);
close:
    pt_tree_close(&t);
    return out;
}

/* link(parents[, with_last]) -> (first_child, last_child, next_sibling) as array('i'):
 * children in id order, written straight into the new columns.  Without `with_last`
 * (a tree only read, never appended to: a saved profile's) last_child is None and its
 * column is scratch memory, freed here (pt_tree_commit makes it when a node is
 * appended).  ValueError unless node 0 is the root and every parent an earlier node.
 * Not async-signal-safe. */
PyObject *pt_py_link(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    int with_last = 1;
    if (!PyArg_ParseTuple(args, "O|p:link", &obj, &with_last))
        return NULL;
    pt_col parents;
    if (pt_col_get(&parents, obj, PT_I32, 0, "parents") < 0)
        return NULL;
    Py_ssize_t n = parents.len;
    const int32_t *up = PT_I32P(&parents);
    PyObject *arrays[3] = {NULL, NULL, NULL}, *result = NULL;
    pt_col cols[3] = {{.held = 0}, {.held = 0}, {.held = 0}};
    int32_t *scratch = NULL; /* last_child when it is not kept */
    for (int k = 0; k < 3; k++) {
        if (k == 1 && !with_last) {
            if ((scratch = malloc(sizeof(int32_t) * (size_t)(n ? n : 1))) == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            memset(scratch, 0xff, sizeof(int32_t) * (size_t)n);
            continue;
        }
        if ((arrays[k] = pt_array_new(PT_I32, NULL, n)) == NULL ||
            pt_col_get(&cols[k], arrays[k], PT_I32, 1, "links") < 0)
            goto done;
        if (n > 0)
            memset(cols[k].data, 0xff, sizeof(int32_t) * (size_t)n);
    }
    int32_t *first = PT_I32P(&cols[0]), *next = PT_I32P(&cols[2]);
    int32_t *last = with_last ? PT_I32P(&cols[1]) : scratch;
    if (n == 0 || up[0] != -1) {
        PyErr_SetString(PyExc_ValueError, "node 0 must be the root");
        goto done;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        int32_t p = up[i];
        if (p < 0 || p >= i) {
            PyErr_Format(PyExc_ValueError, "node %zd: parent %d is not an earlier node", i, p);
            goto done;
        }
        if (last[p] < 0)
            first[p] = (int32_t)i;
        else
            next[last[p]] = (int32_t)i;
        last[p] = (int32_t)i;
    }
    for (int k = 0; k < 3; k++)
        pt_col_release(&cols[k]);
    result = Py_BuildValue("(OOO)", arrays[0], with_last ? arrays[1] : Py_None, arrays[2]);
done:
    for (int k = 0; k < 3; k++) {
        pt_col_release(&cols[k]);
        Py_XDECREF(arrays[k]);
    }
    free(scratch);
    pt_col_release(&parents);
    return result;
}

/* Outermost flags: 1 where no ancestor has the node's key (one pre-order pass counting
 * the keys on the current path).  Not async-signal-safe (malloc). */
static int pt_outer_flags(uint8_t *outer, const int32_t *keys, Py_ssize_t width,
                          const int32_t *first, const int32_t *next, Py_ssize_t n) {
    int32_t *on_path = calloc((size_t)(width ? width : 1), sizeof(int32_t));
    pt_vec ancestors = {0};
    if (on_path == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(outer, 0, (size_t)n);
    int32_t node = first[0];
    while (node >= 0) {
        int32_t key = keys[node];
        if (!on_path[key])
            outer[node] = 1;
        on_path[key]++;
        int32_t child = first[node];
        if (child >= 0) {
            if (pt_vec_push(&ancestors, node) < 0) {
                free(on_path);
                return -1;
            }
            node = child;
            continue;
        }
        for (;;) {
            on_path[keys[node]]--;
            int32_t following = next[node];
            if (following >= 0) {
                node = following;
                break;
            }
            if (ancestors.len == 0) {
                node = -1;
                break;
            }
            node = ancestors.items[--ancestors.len];
        }
    }
    free(on_path);
    pt_vec_free(&ancestors);
    return 0;
}

/* function_sums(tree, keymap, width, outer) -> (selfs, totals, present, calls, outer).
 *
 * Each node's key is keymap[frame] (the frame itself when keymap is None or the frame is
 * past its end; the root's is 0).  Per metric, self costs summed by key over every node
 * but the root, and totals over the nodes `outer` marks (no ancestor of the same key:
 * computed when None), in node id order; `present` flags the keys of some node; `calls`
 * the summed known call counts per key (-1: none), or None when no node's is known.
 * `width` < 0: the largest key + 1.  Totals are the tree's own when computed, else
 * summed here without keeping them.  `outer`, when given, is returned as it is.
 * Not async-signal-safe. */
PyObject *pt_py_function_sums(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *keymap_obj, *outer_obj;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "OOnO:function_sums", &obj, &keymap_obj, &width, &outer_obj))
        return NULL;
    pt_tree t;
    pt_shape s;
    pt_ints keymap = {0};
    pt_col given = {0}; /* `outer` when given: read in place */
    int32_t *keys = NULL;
    uint8_t *outer = NULL, *made = NULL, *present = NULL;
    double *work = NULL, *own = NULL, *tot = NULL;
    int64_t *counted = NULL;
    PyObject *selfs = NULL, *totals = NULL, *result = NULL;
    if (keymap_obj != Py_None && pt_ints_get(&keymap, keymap_obj, "keymap") < 0)
        return NULL;
    if (pt_tree_open(&t, obj, 0) < 0) {
        pt_ints_free(&keymap);
        return NULL;
    }
    if (pt_shape_get(&s, &t, outer_obj == Py_None) < 0)
        goto close;
    Py_ssize_t n = s.n;
    const int32_t *frames = PT_I32P(&s.frames), *parents = PT_I32P(&s.parents);
    keys = malloc(sizeof(int32_t) * (size_t)n);
    work = malloc(sizeof(double) * (size_t)n);
    if (keys == NULL || work == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    keys[0] = 0;
    int64_t largest = 0;
    for (Py_ssize_t i = 1; i < n; i++) {
        int64_t f = frames[i];
        int64_t key = keymap.items != NULL && f >= 0 && f < keymap.len ? keymap.items[f] : f;
        if (key < 0 || key > INT32_MAX || (width >= 0 && key >= width)) {
            PyErr_Format(PyExc_IndexError, "function_sums: node %zd's key %lld is outside 0..%zd",
                         i, (long long)key, width - 1);
            goto release;
        }
        keys[i] = (int32_t)key;
        if (key > largest)
            largest = key;
    }
    if (width < 0)
        width = n > 1 ? (Py_ssize_t)largest + 1 : 1;
    if (outer_obj == Py_None) {
        outer = made = malloc((size_t)n);
        if (made == NULL) {
            PyErr_NoMemory();
            goto release;
        }
        if (pt_outer_flags(made, keys, width, PT_I32P(&s.first), PT_I32P(&s.next), n) < 0)
            goto release;
    } else {
        if (pt_col_get(&given, outer_obj, PT_U8, 0, "outer") < 0)
            goto release;
        if (given.len < n) {
            PyErr_SetString(PyExc_ValueError, "function_sums: outer is shorter than the tree");
            goto release;
        }
        outer = PT_U8P(&given);
    }
    present = calloc((size_t)(width ? width : 1), 1);
    own = malloc(sizeof(double) * (size_t)(width ? width : 1));
    tot = malloc(sizeof(double) * (size_t)(width ? width : 1));
    counted = malloc(sizeof(int64_t) * (size_t)(width ? width : 1));
    selfs = PyList_New(0);
    totals = PyList_New(0);
    if (present == NULL || own == NULL || tot == NULL || counted == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    if (selfs == NULL || totals == NULL)
        goto release;
    for (Py_ssize_t i = 1; i < n; i++)
        present[keys[i]] = 1;
    for (Py_ssize_t m = 0; m < t.n_metrics; m++) {
        pt_col sc, tc = {0};
        const double *total;
        if (pt_col_get(&sc, PyList_GetItem(t.selfs, m), PT_F64, 0, "selfs") < 0)
            goto release;
        if (sc.len != n) {
            pt_col_release(&sc);
            PyErr_SetString(PyExc_ValueError, "CallTree: a self column differs in length");
            goto release;
        }
        if (t.totals != Py_None && m < PyList_Size(t.totals)) {
            if (pt_col_get(&tc, PyList_GetItem(t.totals, m), PT_F64, 0, "totals") < 0) {
                pt_col_release(&sc);
                goto release;
            }
            if (tc.len != n) {
                pt_col_release(&sc);
                pt_col_release(&tc);
                PyErr_SetString(PyExc_ValueError, "CallTree: a total column differs in length");
                goto release;
            }
            total = PT_F64P(&tc);
        } else {
            memcpy(work, sc.data, sizeof(double) * (size_t)n);
            if (pt_sum_up(work, parents, n) < 0) {
                pt_col_release(&sc);
                goto release;
            }
            total = work;
        }
        const double *selfc = PT_F64P(&sc);
        for (Py_ssize_t k = 0; k < width; k++)
            own[k] = tot[k] = 0.0;
        for (Py_ssize_t i = 1; i < n; i++) {
            own[keys[i]] += selfc[i];
            if (outer[i])
                tot[keys[i]] += total[i];
        }
        pt_col_release(&sc);
        pt_col_release(&tc);
        PyObject *a = pt_array_new(PT_F64, own, width);
        if (a == NULL || PyList_Append(selfs, a) < 0) {
            Py_XDECREF(a);
            goto release;
        }
        Py_DECREF(a);
        PyObject *b = pt_array_new(PT_F64, tot, width);
        if (b == NULL || PyList_Append(totals, b) < 0) {
            Py_XDECREF(b);
            goto release;
        }
        Py_DECREF(b);
    }
    PyObject *calls_out = Py_None;
    pt_col cc = {0};
    if (t.calls != NULL && pt_col_get(&cc, t.calls, PT_I64, 0, "calls") < 0)
        goto release;
    int known = 0;
    for (Py_ssize_t i = 0; i < cc.len && !known; i++)
        known = PT_I64P(&cc)[i] >= 0;
    if (known) {
        for (Py_ssize_t k = 0; k < width; k++)
            counted[k] = -1;
        for (Py_ssize_t i = 1; i < n && i < cc.len; i++) {
            int64_t c = PT_I64P(&cc)[i];
            if (c >= 0)
                counted[keys[i]] = counted[keys[i]] < 0 ? c : counted[keys[i]] + c;
        }
    }
    pt_col_release(&cc);
    if (known && (calls_out = pt_array_new(PT_I64, counted, width)) == NULL)
        goto release;
    if (!known)
        Py_INCREF(Py_None);
    PyObject *p = PyByteArray_FromStringAndSize((const char *)present, width), *o = NULL;
    if (p != NULL && made == NULL) {
        o = outer_obj;
        Py_INCREF(o);
    } else if (p != NULL) {
        o = PyByteArray_FromStringAndSize((const char *)made, n);
    }
    if (o == NULL) {
        Py_XDECREF(p);
        Py_DECREF(calls_out);
        goto release;
    }
    result = Py_BuildValue("(OONNN)", selfs, totals, p, calls_out, o);
release:
    pt_col_release(&given);
    pt_shape_release(&s);
close:
    pt_tree_close(&t);
    pt_ints_free(&keymap);
    Py_XDECREF(selfs);
    Py_XDECREF(totals);
    free(keys);
    free(made);
    free(present);
    free(work);
    free(own);
    free(tot);
    free(counted);
    return result;
}

/* add_along(tree, leaf, values, outer, group_of, fn_self, fn_total): StackProfile's
 * count change: each non-zero value to the leaf's self cost, to the total of the leaf
 * and every ancestor (when the tree's totals are computed; else they are summed when
 * read), and unless `outer` is None to the leaf's function's self (fn_self[m][group])
 * and to the total of every function on the path once, at its outermost node
 * (fn_total).  Not async-signal-safe. */
PyObject *pt_py_add_along(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *values_obj, *outer_obj, *group_obj, *fn_self, *fn_total;
    Py_ssize_t leaf;
    if (!PyArg_ParseTuple(args, "OnOOOOO:add_along", &obj, &leaf, &values_obj, &outer_obj,
                          &group_obj, &fn_self, &fn_total))
        return NULL;
    PyObject *values = PySequence_Fast(values_obj, "values");
    if (values == NULL)
        return NULL;
    pt_tree t;
    pt_col parents = {0}, frames = {0}, outer = {0}, group_of = {0};
    pt_vec path = {0}, groups = {0};
    int ok = 0;
    if (pt_tree_open(&t, obj, 0) < 0) {
        Py_DECREF(values);
        return NULL;
    }
    Py_ssize_t nv = PySequence_Size(values);
    int functions = outer_obj != Py_None; /* None: the tree alone */
    if (nv > t.n_metrics || (functions && (!PyList_Check(fn_self) || !PyList_Check(fn_total) ||
                                           PyList_Size(fn_self) < nv ||
                                           PyList_Size(fn_total) < nv))) {
        PyErr_SetString(PyExc_ValueError, "add_along: more values than metrics");
        goto done;
    }
    if (pt_col_get(&parents, t.parents, PT_I32, 0, "parents") < 0 ||
        pt_col_get(&frames, t.frames, PT_I32, 0, "frames") < 0 ||
        (functions && (pt_col_get(&outer, outer_obj, PT_U8, 0, "outer") < 0 ||
                       pt_col_get(&group_of, group_obj, PT_I32, 0, "group_of") < 0)))
        goto done;
    if (leaf < 0 || leaf >= parents.len || (functions && outer.len < parents.len)) {
        PyErr_SetString(PyExc_IndexError, "add_along: leaf is not a node of the tree");
        goto done;
    }
    const int32_t *up = PT_I32P(&parents), *fr = PT_I32P(&frames), *gof = PT_I32P(&group_of);
    int32_t leaf_group = -1;
    for (Py_ssize_t node = leaf; node >= 0; node = up[node]) {
        if (path.len > parents.len) {
            PyErr_SetString(PyExc_ValueError, "add_along: parents form a cycle");
            goto done;
        }
        if (pt_vec_push(&path, (int32_t)node) < 0)
            goto done;
        if (functions && node && PT_U8P(&outer)[node]) {
            int32_t f = fr[node];
            if (f < 0 || f >= group_of.len) {
                PyErr_SetString(PyExc_IndexError, "add_along: frame without a group");
                goto done;
            }
            if (pt_vec_push(&groups, gof[f]) < 0)
                goto done;
        }
        if (node == 0)
            break;
    }
    if (functions && leaf) {
        int32_t f = fr[leaf];
        if (f < 0 || f >= group_of.len) {
            PyErr_SetString(PyExc_IndexError, "add_along: frame without a group");
            goto done;
        }
        leaf_group = gof[f];
    }
    for (Py_ssize_t m = 0; m < nv; m++) {
        PyObject *item = PySequence_GetItem(values, m);
        if (item == NULL)
            goto done;
        double value = PyFloat_AsDouble(item);
        Py_DECREF(item);
        if (value == -1.0 && PyErr_Occurred())
            goto done;
        if (value == 0.0)
            continue;
        pt_col sc, fs, ft;
        if (pt_col_get(&sc, PyList_GetItem(t.selfs, m), PT_F64, 1, "selfs") < 0)
            goto done;
        PT_F64P(&sc)[leaf] += value;
        pt_col_release(&sc);
        if (t.totals != Py_None) {
            pt_col tc;
            if (pt_col_get(&tc, PyList_GetItem(t.totals, m), PT_F64, 1, "totals") < 0)
                goto done;
            for (Py_ssize_t k = 0; k < path.len; k++)
                PT_F64P(&tc)[path.items[k]] += value;
            pt_col_release(&tc);
        }
        if (!functions)
            continue;
        if (pt_col_get(&fs, PyList_GetItem(fn_self, m), PT_F64, 1, "fn_self") < 0)
            goto done;
        if (pt_col_get(&ft, PyList_GetItem(fn_total, m), PT_F64, 1, "fn_total") < 0) {
            pt_col_release(&fs);
            goto done;
        }
        int fits = leaf_group < fs.len;
        for (Py_ssize_t k = 0; k < groups.len; k++)
            fits = fits && groups.items[k] >= 0 && groups.items[k] < ft.len;
        if (fits) {
            if (leaf_group >= 0)
                PT_F64P(&fs)[leaf_group] += value;
            for (Py_ssize_t k = 0; k < groups.len; k++)
                PT_F64P(&ft)[groups.items[k]] += value;
        }
        pt_col_release(&fs);
        pt_col_release(&ft);
        if (!fits) {
            PyErr_SetString(PyExc_IndexError, "add_along: function totals too short");
            goto done;
        }
    }
    ok = 1;
done:
    pt_col_release(&parents);
    pt_col_release(&frames);
    pt_col_release(&outer);
    pt_col_release(&group_of);
    pt_vec_free(&path);
    pt_vec_free(&groups);
    pt_tree_close(&t);
    Py_DECREF(values);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}
