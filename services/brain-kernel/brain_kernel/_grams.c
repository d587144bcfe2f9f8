/* The search index's gram codes in C: brain_kernel.search_docs.grams_text_py, the same codes at C speed.
 *
 * grams_text(lowered) -> "{c1,c2,...}": the distinct codes of every gram of three, two and one characters of
 * the whitespace-free runs of ``lowered`` (runs as ``str.split()`` cuts them: at ``Py_UNICODE_ISSPACE``, which
 * is ``str.isspace``), in no particular order. A gram's code (``search_docs._code``): its code points as bytes
 * when all are ASCII, else ((sum of point * mix) + (0 for a trigram, else its length)) & 0xFFFFFFFF with the
 * top bit set, read as a signed 32-bit integer. tests/test_search_docs.py compares the two on many texts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

static const uint64_t MIX[3] = {0x9E3779B1u, 0x85EBCA77u, 0xC2B2AE3Du};

static int32_t code_of(const Py_UCS4 *points, int n) {
    if ((points[0] | (n > 1 ? points[1] : 0) | (n > 2 ? points[2] : 0)) < 128) {
        uint32_t code = 0;
        for (int i = 0; i < n; i++) code = (code << 8) | points[i];
        return (int32_t)code;
    }
    uint64_t mixed = 0;
    for (int i = 0; i < n; i++) mixed += (uint64_t)points[i] * MIX[i];
    if (n != 3) mixed += (uint64_t)n;
    return (int32_t)(uint32_t)((mixed & 0xFFFFFFFFu) | 0x80000000u);
}

/* An open-addressing set of int32 codes; a slot holds code + 1 as uint64 (0 = empty), so every code fits. */
typedef struct {
    uint64_t *slots;
    size_t mask, used;
} CodeSet;

static int set_init(CodeSet *set, size_t want) {
    size_t size = 256;
    while (size < want * 2) size <<= 1;
    set->slots = calloc(size, sizeof(uint64_t));
    set->mask = size - 1;
    set->used = 0;
    return set->slots != NULL;
}

static inline size_t slot_of(uint64_t key, size_t mask) {
    return (size_t)((key * 0x9E3779B97F4A7C15u) >> 17) & mask;
}

static int set_grow(CodeSet *set) {
    size_t size = (set->mask + 1) << 1;
    uint64_t *slots = calloc(size, sizeof(uint64_t));
    if (slots == NULL) return 0;
    for (size_t i = 0; i <= set->mask; i++) {
        uint64_t key = set->slots[i];
        if (key == 0) continue;
        size_t j = slot_of(key, size - 1);
        while (slots[j] != 0) j = (j + 1) & (size - 1);
        slots[j] = key;
    }
    free(set->slots);
    set->slots = slots;
    set->mask = size - 1;
    return 1;
}

static int set_add(CodeSet *set, int32_t code) {
    uint64_t key = (uint64_t)(uint32_t)code + 1;
    size_t j = slot_of(key, set->mask);
    while (set->slots[j] != 0) {
        if (set->slots[j] == key) return 1;
        j = (j + 1) & set->mask;
    }
    set->slots[j] = key;
    if (++set->used * 2 > set->mask + 1) return set_grow(set);
    return 1;
}

static PyObject *grams_text(PyObject *module, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "grams_text() takes a str");
        return NULL;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(arg);
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    CodeSet set;
    if (!set_init(&set, (size_t)length < 4096 ? (size_t)length : 4096)) return PyErr_NoMemory();
    Py_UCS4 window[3];
    int held = 0; /* characters of the current run in the window, at most 3 */
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (Py_UNICODE_ISSPACE(ch)) {
            held = 0;
            continue;
        }
        if (held == 3) {
            window[0] = window[1];
            window[1] = window[2];
            held = 2;
        }
        window[held++] = ch;
        int ok = set_add(&set, code_of(&window[held - 1], 1));
        if (held >= 2) ok = ok && set_add(&set, code_of(&window[held - 2], 2));
        if (held == 3) ok = ok && set_add(&set, code_of(window, 3));
        if (!ok) {
            free(set.slots);
            return PyErr_NoMemory();
        }
    }
    /* "{" + the codes, each at most 11 characters and a comma + "}" */
    char *out = malloc(set.used * 12 + 3);
    if (out == NULL) {
        free(set.slots);
        return PyErr_NoMemory();
    }
    char *at = out;
    *at++ = '{';
    for (size_t i = 0; i <= set.mask; i++) {
        if (set.slots[i] == 0) continue;
        int32_t code = (int32_t)(uint32_t)(set.slots[i] - 1);
        if (at != out + 1) *at++ = ',';
        char digits[12];
        int n = 0;
        int64_t value = code;
        int negative = value < 0;
        if (negative) value = -value;
        do {
            digits[n++] = (char)('0' + value % 10);
            value /= 10;
        } while (value > 0);
        if (negative) *at++ = '-';
        while (n > 0) *at++ = digits[--n];
    }
    *at++ = '}';
    free(set.slots);
    PyObject *result = PyUnicode_FromStringAndSize(out, at - out);
    free(out);
    return result;
}

static PyMethodDef methods[] = {
    {"grams_text", grams_text, METH_O, "The int4[] literal of the distinct gram codes of lower-cased text (search_docs.grams_text_py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_grams", "The search index's gram codes at C speed.", -1, methods};

PyMODINIT_FUNC PyInit__grams(void) { return PyModule_Create(&module); }
