/* pt_columns.c: passes over plain columns: range checks of a loaded profile's columns,
 * and the per-stack sums of the timeline (time-range slices): scatter-adds, per-part
 * activity, per-stack costs into tree nodes and per code key.  Sums run in the order
 * the Python model made them. */
#include "pt_core.h"

#include <stdlib.h>
#include <string.h>

/* The kind of a buffer's items ('i', 'q', 'd', or 0).  Not async-signal-safe. */
static int pt_kind_of(PyObject *obj) {
    Py_buffer probe;
    if (PyObject_GetBuffer(obj, &probe, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return 0;
    }
    char c = probe.format ? probe.format[0] : 'B';
    Py_ssize_t size = probe.itemsize;
    PyBuffer_Release(&probe);
    if (c == 'd' && size == 8)
        return PT_F64;
    if ((c == 'i' || c == 'l') && size == 4)
        return PT_I32;
    if ((c == 'q' || c == 'l') && size == 8)
        return PT_I64;
    return 0;
}

/* check(column, lo, hi, start) -> the first index >= start whose item is not within
 * [lo, hi] (a NaN never is), or -1.  Not async-signal-safe. */
PyObject *pt_py_check(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *lo_obj, *hi_obj;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "OOOn:check", &obj, &lo_obj, &hi_obj, &start))
        return NULL;
    int kind = pt_kind_of(obj);
    if (kind == 0) {
        PyErr_SetString(PyExc_TypeError, "check: expected an array of 'i', 'q' or 'd'");
        return NULL;
    }
    pt_col col;
    if (pt_col_get(&col, obj, kind, 0, "column") < 0)
        return NULL;
    Py_ssize_t bad = -1;
    if (kind == PT_F64) {
        double lo = PyFloat_AsDouble(lo_obj), hi = PyFloat_AsDouble(hi_obj);
        if (PyErr_Occurred()) {
            pt_col_release(&col);
            return NULL;
        }
        for (Py_ssize_t i = start < 0 ? 0 : start; i < col.len && bad < 0; i++) {
            double v = PT_F64P(&col)[i];
            if (!(v >= lo && v <= hi))
                bad = i;
        }
    } else {
        long long lo = PyLong_AsLongLong(lo_obj), hi = PyLong_AsLongLong(hi_obj);
        if (PyErr_Occurred()) {
            pt_col_release(&col);
            return NULL;
        }
        for (Py_ssize_t i = start < 0 ? 0 : start; i < col.len && bad < 0; i++) {
            long long v = kind == PT_I32 ? PT_I32P(&col)[i] : PT_I64P(&col)[i];
            if (v < lo || v > hi)
                bad = i;
        }
    }
    pt_col_release(&col);
    return PyLong_FromSsize_t(bad);
}

/* scatter_add(dst, index, src, lo, hi): dst[index[e]] += src[e] for e in [lo, hi), in
 * order (dst, src: array('d'); index: array('q')).  Not async-signal-safe. */
PyObject *pt_py_scatter_add(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *dst_obj, *index_obj, *src_obj;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "OOOnn:scatter_add", &dst_obj, &index_obj, &src_obj, &lo, &hi))
        return NULL;
    pt_col dst, index, src;
    if (pt_col_get(&dst, dst_obj, PT_F64, 1, "dst") < 0)
        return NULL;
    if (pt_col_get(&index, index_obj, PT_I64, 0, "index") < 0) {
        pt_col_release(&dst);
        return NULL;
    }
    if (pt_col_get(&src, src_obj, PT_F64, 0, "src") < 0) {
        pt_col_release(&dst);
        pt_col_release(&index);
        return NULL;
    }
    int ok = lo >= 0 && hi <= index.len && hi <= src.len;
    for (Py_ssize_t e = lo; ok && e < hi; e++) {
        int64_t at = PT_I64P(&index)[e];
        if (at < 0 || at >= dst.len)
            ok = 0;
        else
            PT_F64P(&dst)[at] += PT_F64P(&src)[e];
    }
    pt_col_release(&dst);
    pt_col_release(&index);
    pt_col_release(&src);
    if (!ok) {
        PyErr_SetString(PyExc_IndexError, "scatter_add: index out of range");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* See pt_core.h.  Not async-signal-safe. */
Py_ssize_t pt_cols_of(PyObject *list, pt_col *cols, Py_ssize_t most, int writable,
                             const char *what) {
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a list of columns", what);
        return -1;
    }
    Py_ssize_t n = PyList_Size(list);
    if (n > most) {
        PyErr_Format(PyExc_ValueError, "%s: too many columns", what);
        return -1;
    }
    for (Py_ssize_t m = 0; m < n; m++)
        if (pt_col_get(&cols[m], PyList_GetItem(list, m), PT_F64, writable, what) < 0) {
            while (m--)
                pt_col_release(&cols[m]);
            return -1;
        }
    return n;
}

void pt_cols_release(pt_col *cols, Py_ssize_t n) {
    for (Py_ssize_t m = 0; m < n; m++)
        pt_col_release(&cols[m]);
}

/* add_stacks(selfs, leaves, per_stack, parts, part): for each stack s (of `part` when
 * `parts` is not None) with some non-zero cost, selfs[m][leaves[s]] += per_stack[m][s]
 * for the metrics both have.  Not async-signal-safe. */
PyObject *pt_py_add_stacks(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *selfs_obj, *leaves_obj, *costs_obj, *parts_obj;
    long long part;
    if (!PyArg_ParseTuple(args, "OOOOL:add_stacks", &selfs_obj, &leaves_obj, &costs_obj,
                          &parts_obj, &part))
        return NULL;
    pt_col selfs[64], costs[64], leaves, parts = {0};
    Py_ssize_t ns = pt_cols_of(selfs_obj, selfs, 64, 1, "selfs");
    if (ns < 0)
        return NULL;
    Py_ssize_t nc = pt_cols_of(costs_obj, costs, 64, 0, "per_stack");
    if (nc < 0) {
        pt_cols_release(selfs, ns);
        return NULL;
    }
    int ok = 0;
    if (pt_col_get(&leaves, leaves_obj, PT_I64, 0, "leaves") < 0)
        goto done;
    if (parts_obj != Py_None && pt_col_get(&parts, parts_obj, PT_I64, 0, "parts") < 0) {
        pt_col_release(&leaves);
        goto done;
    }
    Py_ssize_t n = leaves.len, metrics = ns < nc ? ns : nc;
    ok = parts_obj == Py_None || parts.len >= n;
    for (Py_ssize_t m = 0; m < nc; m++)
        ok = ok && costs[m].len >= n;
    for (Py_ssize_t s = 0; ok && s < n; s++) {
        if (parts_obj != Py_None && PT_I64P(&parts)[s] != part)
            continue;
        int any = 0;
        for (Py_ssize_t m = 0; m < nc && !any; m++)
            any = PT_F64P(&costs[m])[s] != 0.0;
        if (!any)
            continue;
        int64_t leaf = PT_I64P(&leaves)[s];
        for (Py_ssize_t m = 0; ok && m < metrics; m++) {
            if (leaf < 0 || leaf >= selfs[m].len)
                ok = 0;
            else
                PT_F64P(&selfs[m])[leaf] += PT_F64P(&costs[m])[s];
        }
    }
    pt_col_release(&leaves);
    pt_col_release(&parts);
    if (!ok)
        PyErr_SetString(PyExc_IndexError, "add_stacks: a stack's node is outside its tree");
done:
    pt_cols_release(selfs, ns);
    pt_cols_release(costs, nc);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

/* slice_parts(offsets, stacks, part, column, parts) -> [[cost per slice] per part]:
 * rows[part[stacks[e]]][k] += column[e] for each entry e of slice k.
 * Not async-signal-safe. */
PyObject *pt_py_slice_parts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *offsets_obj, *stacks_obj, *part_obj, *column_obj;
    Py_ssize_t nparts;
    if (!PyArg_ParseTuple(args, "OOOOn:slice_parts", &offsets_obj, &stacks_obj, &part_obj,
                          &column_obj, &nparts))
        return NULL;
    pt_col offsets, stacks, part, column;
    if (pt_col_get(&offsets, offsets_obj, PT_I64, 0, "offsets") < 0)
        return NULL;
    if (pt_col_get(&stacks, stacks_obj, PT_I64, 0, "stacks") < 0) {
        pt_col_release(&offsets);
        return NULL;
    }
    if (pt_col_get(&part, part_obj, PT_I64, 0, "part") < 0) {
        pt_col_release(&offsets);
        pt_col_release(&stacks);
        return NULL;
    }
    if (pt_col_get(&column, column_obj, PT_F64, 0, "column") < 0) {
        pt_col_release(&offsets);
        pt_col_release(&stacks);
        pt_col_release(&part);
        return NULL;
    }
    Py_ssize_t slices = offsets.len > 0 ? offsets.len - 1 : 0;
    double *rows = calloc((size_t)(nparts * slices + 1), sizeof(double));
    PyObject *result = NULL;
    int ok = rows != NULL && nparts >= 0;
    if (rows == NULL)
        PyErr_NoMemory();
    for (Py_ssize_t k = 0; ok && k < slices; k++) {
        int64_t lo = PT_I64P(&offsets)[k], hi = PT_I64P(&offsets)[k + 1];
        if (lo < 0 || hi > stacks.len || hi > column.len) {
            ok = 0;
            break;
        }
        for (int64_t e = lo; e < hi; e++) {
            int64_t s = PT_I64P(&stacks)[e];
            int64_t p = s >= 0 && s < part.len ? PT_I64P(&part)[s] : -1;
            if (p < 0 || p >= nparts) {
                ok = 0;
                break;
            }
            rows[p * slices + k] += PT_F64P(&column)[e];
        }
    }
    if (ok) {
        result = PyList_New(nparts);
        for (Py_ssize_t p = 0; result != NULL && p < nparts; p++) {
            PyObject *row = PyList_New(slices);
            if (row == NULL) {
                Py_CLEAR(result);
                break;
            }
            for (Py_ssize_t k = 0; k < slices; k++) {
                PyObject *value = PyFloat_FromDouble(rows[p * slices + k]);
                if (value == NULL || PyList_SetItem(row, k, value) < 0) {
                    Py_DECREF(row);
                    Py_CLEAR(result);
                    break;
                }
            }
            if (result != NULL && PyList_SetItem(result, p, row) < 0)
                Py_CLEAR(result);
        }
    } else if (rows != NULL) {
        PyErr_SetString(PyExc_IndexError, "slice_parts: an entry is outside the index");
    }
    free(rows);
    pt_col_release(&offsets);
    pt_col_release(&stacks);
    pt_col_release(&part);
    pt_col_release(&column);
    return result;
}

/* group_sums(per_stack, keys, width) -> (sums, order): per metric, the costs of the
 * stacks with a key (keys[s] >= 0) and some non-zero cost, summed by key from 0.0 in
 * stack order; `order` lists the keys met, first-met first.  Not async-signal-safe. */
PyObject *pt_py_group_sums(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *costs_obj, *keys_obj;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "OOn:group_sums", &costs_obj, &keys_obj, &width))
        return NULL;
    pt_col costs[64], keys;
    Py_ssize_t nc = pt_cols_of(costs_obj, costs, 64, 0, "per_stack");
    if (nc < 0)
        return NULL;
    if (pt_col_get(&keys, keys_obj, PT_I64, 0, "keys") < 0) {
        pt_cols_release(costs, nc);
        return NULL;
    }
    Py_ssize_t n = keys.len;
    double *sums = calloc((size_t)(nc * width + 1), sizeof(double));
    uint8_t *met = calloc((size_t)(width + 1), 1);
    int64_t *order = malloc(sizeof(int64_t) * (size_t)(width + 1));
    Py_ssize_t norder = 0;
    PyObject *result = NULL, *list = NULL;
    int ok = sums != NULL && met != NULL && order != NULL && width >= 0;
    if (!ok) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t m = 0; m < nc; m++)
        if (costs[m].len < n) {
            PyErr_SetString(PyExc_ValueError, "group_sums: a cost column is too short");
            goto done;
        }
    for (Py_ssize_t s = 0; s < n; s++) {
        int64_t key = PT_I64P(&keys)[s];
        if (key < 0)
            continue;
        if (key >= width) {
            PyErr_SetString(PyExc_IndexError, "group_sums: key out of range");
            goto done;
        }
        int any = 0;
        for (Py_ssize_t m = 0; m < nc && !any; m++)
            any = PT_F64P(&costs[m])[s] != 0.0;
        if (!any)
            continue;
        if (!met[key]) {
            met[key] = 1;
            order[norder++] = key;
        }
        for (Py_ssize_t m = 0; m < nc; m++)
            sums[m * width + key] += 1.0 * PT_F64P(&costs[m])[s];
    }
    list = PyList_New(0);
    for (Py_ssize_t m = 0; list != NULL && m < nc; m++) {
        PyObject *column = pt_array_new(PT_F64, sums + m * width, width);
        if (column == NULL || PyList_Append(list, column) < 0) {
            Py_XDECREF(column);
            Py_CLEAR(list);
        } else {
            Py_DECREF(column);
        }
    }
    if (list != NULL) {
        PyObject *o = pt_array_new(PT_I64, order, norder);
        if (o != NULL)
            result = Py_BuildValue("(ON)", list, o);
    }
done:
    Py_XDECREF(list);
    free(sums);
    free(met);
    free(order);
    pt_col_release(&keys);
    pt_cols_release(costs, nc);
    return result;
}
