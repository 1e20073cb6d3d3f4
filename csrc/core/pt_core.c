/* pt_core.c: the module proftui.collectors.model._core: its function table, and the
 * helpers every file uses (borrowed columns, new arrays, growable vectors).
 * The interface is documented in collectors/model/core.py, which is what Python
 * code imports. */
#include "pt_core.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* Blocks from this size up are always mmap'd (glibc).  Left to itself, glibc raises the
 * threshold each time such a block is freed, so a tree's columns, which grow by
 * reallocation, then come from the heap: each growth copies them and the freed copies
 * stay in the process.  Fixed, the columns grow by mremap and are given back when freed;
 * the front end's peak memory follows its data. */
#define PT_MMAP_THRESHOLD (1 << 20)

/* array.array, imported at module init; proftui runs one interpreter per process. */
static PyObject *pt_array_type;
/* The Index type (pt_index.c), made at module init for the same reason. */
PyObject *pt_index_type;

/* Does the buffer format `fmt` (itemsize `size`) hold items of `kind`?
 * Not async-signal-safe (called under the GIL only). */
static int pt_kind_matches(const char *fmt, Py_ssize_t size, int kind) {
    char c = fmt == NULL ? 'B' : fmt[0];
    if (c == '@' || c == '=' || c == '<')
        c = fmt[1];
    switch (kind) {
    case PT_I32:
        return size == 4 && (c == 'i' || c == 'l');
    case PT_I64:
        return size == 8 && (c == 'q' || c == 'l');
    case PT_F64:
        return size == 8 && c == 'd';
    case PT_U8:
        return size == 1 && (c == 'B' || c == 'b' || c == 'c' || c == '?');
    default:
        return 0;
    }
}

/* See pt_core.h.  Not async-signal-safe. */
int pt_col_get(pt_col *col, PyObject *obj, int kind, int writable, const char *what) {
    col->held = 0;
    col->data = NULL;
    col->len = 0;
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &col->view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a%s buffer of '%c' items", what,
                     writable ? " writable" : "", kind);
        return -1;
    }
    if (!pt_kind_matches(col->view.format, col->view.itemsize, kind)) {
        PyErr_Format(PyExc_TypeError, "%s: expected '%c' items, got '%s'", what, kind,
                     col->view.format ? col->view.format : "B");
        PyBuffer_Release(&col->view);
        return -1;
    }
    col->held = 1;
    col->data = col->view.buf;
    col->len = col->view.len / col->view.itemsize;
    return 0;
}

/* See pt_core.h.  Not async-signal-safe. */
void pt_col_release(pt_col *col) {
    if (col->held) {
        PyBuffer_Release(&col->view);
        col->held = 0;
    }
}

/* See pt_core.h.  Not async-signal-safe. */
int pt_ints_get(pt_ints *out, PyObject *obj, const char *what) {
    out->items = NULL;
    out->len = 0;
    pt_col col;
    static const int kinds[] = {PT_I32, PT_I64, PT_U8};
    if (PyObject_CheckBuffer(obj)) {
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            Py_buffer probe;
            if (PyObject_GetBuffer(obj, &probe, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
                PyErr_Clear();
                break;
            }
            int ok = pt_kind_matches(probe.format, probe.itemsize, kinds[k]);
            PyBuffer_Release(&probe);
            if (!ok)
                continue;
            if (pt_col_get(&col, obj, kinds[k], 0, what) < 0)
                return -1;
            out->items = malloc(sizeof(int64_t) * (size_t)(col.len ? col.len : 1));
            if (out->items == NULL) {
                pt_col_release(&col);
                PyErr_NoMemory();
                return -1;
            }
            for (Py_ssize_t i = 0; i < col.len; i++)
                out->items[i] = kinds[k] == PT_I32 ? PT_I32P(&col)[i]
                                : kinds[k] == PT_I64 ? PT_I64P(&col)[i]
                                                     : PT_U8P(&col)[i];
            out->len = col.len;
            pt_col_release(&col);
            return 0;
        }
    }
    PyObject *seq = PySequence_Fast(obj, what);
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Size(seq);
    out->items = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (out->items == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(seq, i);
        if (item == NULL)
            goto fail;
        long long value = PyLong_AsLongLong(item);
        Py_DECREF(item);
        if (value == -1 && PyErr_Occurred())
            goto fail;
        out->items[i] = value;
    }
    out->len = n;
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    pt_ints_free(out);
    return -1;
}

/* See pt_core.h.  Not async-signal-safe. */
void pt_ints_free(pt_ints *v) {
    free(v->items);
    v->items = NULL;
    v->len = 0;
}

/* See pt_core.h.  Not async-signal-safe. */
PyObject *pt_array_new(int kind, const void *data, Py_ssize_t items) {
    char code[2] = {(char)kind, 0};
    PyObject *out = PyObject_CallFunction(pt_array_type, "s", code);
    if (out == NULL || items == 0)
        return out;
    size_t size = kind == PT_I32 ? 4 : kind == PT_U8 ? 1 : 8;
    void *zeros = NULL;
    if (data == NULL) {
        zeros = calloc((size_t)items, size);
        if (zeros == NULL) {
            Py_DECREF(out);
            return PyErr_NoMemory();
        }
        data = zeros;
    }
    int rc = pt_extend(out, data, (Py_ssize_t)(size * (size_t)items));
    free(zeros);
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* See pt_core.h.  Not async-signal-safe. */
int pt_extend(PyObject *column, const void *data, Py_ssize_t nbytes) {
    if (nbytes == 0)
        return 0;
    PyObject *view = PyMemoryView_FromMemory((char *)data, nbytes, PyBUF_READ);
    if (view == NULL)
        return -1;
    const char *method = PyObject_TypeCheck(column, &PyByteArray_Type) ? "extend" : "frombytes";
    PyObject *rc = PyObject_CallMethod(column, method, "O", view);
    Py_DECREF(view);
    if (rc == NULL)
        return -1;
    Py_DECREF(rc);
    return 0;
}

/* See pt_core.h.  Not async-signal-safe. */
void pt_raise_nomem(void) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyErr_NoMemory();
    PyGILState_Release(gil);
}

/* See pt_core.h.  Not async-signal-safe. */
void pt_raise(PyObject *type, const char *msg) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyErr_SetString(type, msg);
    PyGILState_Release(gil);
}

/* See pt_core.h.  Not async-signal-safe. */
int pt_vec_push(pt_vec *v, int32_t value) {
    if (v->len == v->cap) {
        Py_ssize_t cap = v->cap ? 2 * v->cap : 64;
        int32_t *items = realloc(v->items, sizeof(int32_t) * (size_t)cap);
        if (items == NULL) {
            pt_raise_nomem();
            return -1;
        }
        v->items = items;
        v->cap = cap;
    }
    v->items[v->len++] = value;
    return 0;
}

/* See pt_core.h.  Not async-signal-safe. */
void pt_vec_free(pt_vec *v) {
    free(v->items);
    v->items = NULL;
    v->len = v->cap = 0;
}

static PyMethodDef pt_methods[] = {
    {"child", pt_py_child, METH_VARARGS, "child(tree, node, frame) -> node (made if absent)"},
    {"find", pt_py_find, METH_VARARGS, "find(tree, node, frame) -> child node or -1"},
    {"walk", pt_py_walk, METH_VARARGS, "walk(tree, frames, at) -> node (made as needed)"},
    {"insert_paths", pt_py_insert_paths, METH_VARARGS,
     "insert_paths(tree, paths, offsets, outer, group_of, groups) -> leaves"},
    {"fold", pt_py_fold, METH_VARARGS,
     "fold(tree, node, other, other_nodes, sign, frame_map, metric_pairs)"},
    {"node_map", pt_py_node_map, METH_VARARGS, "node_map(tree, into, frame_map) -> nodes"},
    {"invert", pt_py_invert, METH_VARARGS, "invert(src, dst, max_depth) -> cut"},
    {"callers", pt_py_callers, METH_VARARGS,
     "callers(src, src_totals, dst, nodes, root_frame, max_depth) -> cut"},
    {"paths_of", pt_py_paths_of, METH_VARARGS, "paths_of(tree, leaves) -> (paths, offsets)"},
    {"totals", pt_py_totals, METH_VARARGS, "totals(tree) -> [total column per metric]"},
    {"link", pt_py_link, METH_VARARGS,
     "link(parents, with_last=True) -> (first, last or None, next)"},
    {"function_sums", pt_py_function_sums, METH_VARARGS,
     "function_sums(tree, keymap, width, outer) -> (selfs, totals, present, calls, outer)"},
    {"add_along", pt_py_add_along, METH_VARARGS,
     "add_along(tree, leaf, values, outer, group_of, fn_self, fn_total)"},
    {"preorder", pt_py_preorder, METH_VARARGS, "preorder(tree) -> nodes"},
    {"max_depth", pt_py_max_depth, METH_VARARGS, "max_depth(tree) -> int"},
    {"outermost_of", pt_py_outermost_of, METH_VARARGS, "outermost_of(tree, mask) -> nodes"},
    {"nodes_matching", pt_py_nodes_matching, METH_VARARGS,
     "nodes_matching(tree, mask) -> nodes"},
    {"pruned", pt_py_pruned, METH_VARARGS,
     "pruned(tree, totals) -> (parents, frames, selfs, calls)"},
    {"remap_frames", pt_py_remap_frames, METH_VARARGS,
     "remap_frames(tree, frame_map) -> (frames, merges)"},
    {"neighbours", pt_py_neighbours, METH_VARARGS,
     "neighbours(tree, totals, mask, callees) -> (keys, sums, calls)"},
    {"share_walk", pt_py_share_walk, METH_VARARGS,
     "share_walk(tree, totals, metric, matches, stack, budget) -> (total, stack)"},
    {"display_order", pt_py_display_order, METH_VARARGS,
     "display_order(tree, totals, metric, start, mask, max_depth) -> nodes"},
    {"check", pt_py_check, METH_VARARGS, "check(column, lo, hi, start) -> first bad or -1"},
    {"scatter_add", pt_py_scatter_add, METH_VARARGS, "scatter_add(dst, index, src, lo, hi)"},
    {"add_stacks", pt_py_add_stacks, METH_VARARGS,
     "add_stacks(selfs, leaves, per_stack, parts, part)"},
    {"slice_parts", pt_py_slice_parts, METH_VARARGS,
     "slice_parts(offsets, stacks, part, column, parts) -> rows"},
    {"group_sums", pt_py_group_sums, METH_VARARGS,
     "group_sums(per_stack, keys, width) -> (sums, present)"},
    {"add_rows", pt_py_add_rows, METH_VARARGS,
     "add_rows(selfs, leaves, index, values, parts, part)"},
    {"take_changes", pt_py_take_changes, METH_VARARGS,
     "take_changes(costs, handed, index) -> (moved, deltas)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef pt_module = {
    PyModuleDef_HEAD_INIT, "_core",
    "proftui's native data path (see collectors/model/core.py).", -1, pt_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void) {
    mallopt(M_MMAP_THRESHOLD, PT_MMAP_THRESHOLD);
    PyObject *module = PyModule_Create(&pt_module);
    if (module == NULL)
        return NULL;
    PyObject *array = PyImport_ImportModule("array");
    if (array == NULL)
        goto fail;
    pt_array_type = PyObject_GetAttrString(array, "array");
    Py_DECREF(array);
    if (pt_array_type == NULL)
        goto fail;
    pt_index_type = PyType_FromSpec(&pt_index_spec);
    if (pt_index_type == NULL || PyModule_AddObjectRef(module, "Index", pt_index_type) < 0)
        goto fail;
    PyObject *addr = PyType_FromSpec(&pt_addr_spec);
    if (addr == NULL || PyModule_AddObject(module, "AddressCache", addr) < 0) {
        Py_XDECREF(addr);
        goto fail;
    }
    return module;
fail:
    Py_DECREF(module);
    return NULL;
}
