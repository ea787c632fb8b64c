/* mpi4py's C API as the bridged namespace hands it out: communicators ask mmpi first.
 *
 * A C extension written for mpi4py (`import_mpi4py()`, then `PyMPIComm_Get(obj)`) imports
 * `mpi4py.MPI`, which is mmpi's namespace under mmpi-run, and takes its functions from that
 * module's `__pyx_capi__` (_runtime/facade.py's capi_table), whose functions come from here
 * (the extension's `wrap_capi`, crank.c's module table). It wraps two of mpi4py's own:
 *
 *   PyMPIComm_Get(obj)  first asks `resolve_get(obj)` for the object whose handle C code may
 *                       have: the argument itself, or the native communicator that stands for
 *                       a bridged one; it raises NotBridged where none can (a communicator
 *                       across the zipper), so C code never gets MPI_COMM_NULL in silence;
 *   PyMPIComm_New(h)    passes mpi4py's answer through `resolve_new`, which gives the bridged
 *                       communicator (or COMM_SELF's class) that the handle came from.
 *
 * Rule: the pointer PyMPIComm_Get returns points into an object that outlives the call: the
 * argument (the caller holds it) or a native communicator its bridged object keeps.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mpi.h>

typedef MPI_Comm *(*comm_get_t)(PyObject *);
typedef PyObject *(*comm_new_t)(MPI_Comm);

static comm_get_t native_get;
static comm_new_t native_new;
static PyObject *resolve_get, *resolve_new, *kept; /* references kept for the process's life */

static MPI_Comm *comm_get(PyObject *arg) {
    PyObject *target = PyObject_CallOneArg(resolve_get, arg);
    if (!target) return NULL;
    MPI_Comm *handle = native_get(target);
    Py_DECREF(target); /* see the Rule */
    return handle;
}

static PyObject *comm_new(MPI_Comm handle) {
    PyObject *obj = native_new(handle);
    if (!obj) return NULL;
    PyObject *out = PyObject_CallOneArg(resolve_new, obj);
    Py_DECREF(obj);
    return out;
}

/* wrap_capi(get capsule, new capsule, resolve_get, resolve_new) -> (get, new capsules):
 * capsules of the same signatures (their names are mpi4py's, which are the signatures). */
PyObject *capi_wrap(PyObject *self, PyObject *args) {
    PyObject *get, *new, *rg, *rn;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!OO:wrap_capi", &PyCapsule_Type, &get, &PyCapsule_Type, &new,
                          &rg, &rn))
        return NULL;
    if (native_get) {
        PyErr_SetString(PyExc_RuntimeError, "mmpi._backend._compiled.wrap_capi: called twice");
        return NULL;
    }
    const char *get_name = PyCapsule_GetName(get), *new_name = PyCapsule_GetName(new);
    if (PyErr_Occurred()) return NULL;
    comm_get_t g = (comm_get_t)PyCapsule_GetPointer(get, get_name);
    comm_new_t n = (comm_new_t)PyCapsule_GetPointer(new, new_name);
    if (!g || !n) return NULL;
    /* mpi4py's capsules own the names ours borrow: keep them, and the resolvers */
    kept = Py_BuildValue("(OOOO)", get, new, rg, rn);
    if (!kept) return NULL;
    native_get = g;
    native_new = n;
    resolve_get = rg;
    resolve_new = rn;
    return Py_BuildValue("(NN)", PyCapsule_New((void *)comm_get, get_name, NULL),
                         PyCapsule_New((void *)comm_new, new_name, NULL));
}
