/*
 * strongroom.crypto._gcm: native AES-256-GCM for the two hot loops that are nothing but it: the decrypting
 * consumer's opener (issue 18) and the key manager's batch of new subject keys (issue 13).
 *
 * Three things, all built by `make` from this file against the system's OpenSSL (libcrypto 3) and the
 * virtualenv's Python headers; nothing here is a cipher of its own:
 *
 *   Gcm(key)            an AES-256-GCM key ready to use with OpenSSL's EVP interface (EVP_aes_256_gcm), the
 *                       same primitive `cryptography`'s AESGCM wraps. Its decrypt(nonce, data, aad) and
 *                       encrypt(nonce, data, aad) answer exactly as AESGCM's do: the plaintext or
 *                       cryptography.exceptions.InvalidTag; ciphertext ‖ tag. The expanded key lives in the
 *                       EVP context only; EVP_CIPHER_CTX_free cleanses it when the object goes.
 *
 *   open_run(...)       the loop of batch_open.open_simple for whole-value records, record by record in
 *                       the same order with the same checks, stopping (returning the record's index) at
 *                       the first record it cannot open from what is already prepared: another topic, a
 *                       record of any other shape, an opener or a cipher not built yet, a tag that does
 *                       not verify. batch_open then takes that record through its Python path, which
 *                       judges it exactly as before. So this file decides nothing the Python path does
 *                       not; it only skips the interpreter for records that path would open.
 *
 *   seal_fields(...)    field mode's sealing of a record's top-level members for the producer's batch path
 *   open_fields(...)    (clients.batch_seal) and its opening for the consumer's (clients.batch_open), issue 18:
 *                       the document read and written by the strict reader of envelope/_json_scan.h, each
 *                       rule field sealed or opened here, spliced into the canonical text. Either answers
 *                       None whenever the Python path must judge the record (a document the reader is not
 *                       sure of, a string that looks sealed, an envelope of another shape, a key not ready,
 *                       a tag that does not verify, a plaintext not in canonical form): that path then reads
 *                       it exactly as before, so these decide nothing it does not. The same bytes as
 *                       json_fields' _seal_members and _open_members (tests/unit/envelope/test_native_field_crypto.py).
 *
 *   wrap_subject_keys(...)  keys.wrapping.new_wrapped_subject_keys for a batch (issue 13): each new subject
 *                       key sealed under its wrapping key with EVP_aes_256_gcm, the same AAD and layout, from
 *                       randomness the caller drew (os.urandom). Equal to the Python loop byte for byte
 *                       (tests/unit/keys/test_keys_wrapping.py); one EVP context per batch, freed (cleansed)
 *                       before it returns.
 *
 * The GIL is held throughout (no Python code runs meanwhile, so a Gcm is never used by two threads).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <openssl/evp.h>

#include "../envelope/_json_scan.h"

#define KEY_SIZE 32
#define NONCE_SIZE 12
#define TAG_SIZE 16
/* magic, version, algorithm, key-reference kind (4) | key id (16) | AAD profile (1) | nonce | ... | tag */
#define KEY_ID_END 20
#define HEADER_END 21
#define NONCE_END (HEADER_END + NONCE_SIZE)
#define MIN_SIZE (NONCE_END + TAG_SIZE)
#define N_FIELDS 12
/* wrap_subject_keys: a subject key, its id, the wrapping nonce; the AAD's label, the subject's size (u32be) */
#define SK_ID_SIZE 16
#define WK_ID_SIZE 16
#define SK_MATERIAL (KEY_SIZE + SK_ID_SIZE + NONCE_SIZE)
#define WRAPPED_SIZE (NONCE_SIZE + KEY_SIZE + TAG_SIZE)
#define MAX_LABEL 64
#define MAX_SUBJECT 4096
/* field mode: a sealed field is the JSON string "sr1:" + base64(envelope) */
#define FIELD_QUOTE "\"sr1:"
#define FIELD_QUOTE_LEN 5

/* ---- Gcm ------------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    EVP_CIPHER_CTX *ctx;
} GcmObject;

static PyObject *invalid_tag; /* cryptography.exceptions.InvalidTag */

static void gcm_dealloc(GcmObject *self) {
    EVP_CIPHER_CTX_free(self->ctx); /* cleanses the key schedule */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *gcm_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"key", NULL};
    Py_buffer key;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*:Gcm", names, &key)) return NULL;
    if (key.len != KEY_SIZE) {
        PyBuffer_Release(&key);
        PyErr_SetString(PyExc_ValueError, "an AES-256-GCM key is 32 bytes");
        return NULL;
    }
    GcmObject *self = (GcmObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        PyBuffer_Release(&key);
        return NULL;
    }
    self->ctx = EVP_CIPHER_CTX_new();
    int ok = self->ctx != NULL && EVP_DecryptInit_ex(self->ctx, EVP_aes_256_gcm(), NULL, key.buf, NULL) == 1;
    PyBuffer_Release(&key);
    if (!ok) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL could not set up AES-256-GCM");
        return NULL;
    }
    return (PyObject *)self;
}

/* The plaintext of ciphertext ‖ tag under nonce and aad: a new bytes object, or NULL with InvalidTag set. */
static PyObject *gcm_open(GcmObject *self, const unsigned char *nonce, const unsigned char *data, Py_ssize_t len,
                          const unsigned char *aad, Py_ssize_t aad_len) {
    if (len < TAG_SIZE || len - TAG_SIZE > INT_MAX || aad_len > INT_MAX) {
        PyErr_SetNone(invalid_tag);
        return NULL;
    }
    int text_len = (int)(len - TAG_SIZE), out_len = 0;
    PyObject *plain = PyBytes_FromStringAndSize(NULL, text_len);
    if (plain == NULL) return NULL;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(plain);
    EVP_CIPHER_CTX *ctx = self->ctx;
    int ok = EVP_DecryptInit_ex(ctx, NULL, NULL, NULL, nonce) == 1 &&
             (aad_len == 0 || EVP_DecryptUpdate(ctx, NULL, &out_len, aad, (int)aad_len) == 1) &&
             EVP_DecryptUpdate(ctx, out, &out_len, data, text_len) == 1 &&
             EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_SIZE, (void *)(data + text_len)) == 1 &&
             EVP_DecryptFinal_ex(ctx, out + out_len, &out_len) == 1;
    if (!ok) {
        Py_DECREF(plain); /* unauthenticated bytes never leave */
        PyErr_SetNone(invalid_tag);
        return NULL;
    }
    return plain;
}

/* ciphertext ‖ tag of plain under nonce and aad into out (len + TAG_SIZE bytes). 1 on success. The context was set
 * up to decrypt: a nonce given with the direction switches it, the key schedule stays. */
static int gcm_seal(GcmObject *self, const unsigned char *nonce, const unsigned char *plain, Py_ssize_t len,
                    const unsigned char *aad, Py_ssize_t aad_len, unsigned char *out) {
    if (len > INT_MAX - TAG_SIZE || aad_len > INT_MAX) return 0;
    int out_len = 0, final_len = 0;
    EVP_CIPHER_CTX *ctx = self->ctx;
    return EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, nonce) == 1 &&
           (aad_len == 0 || EVP_EncryptUpdate(ctx, NULL, &out_len, aad, (int)aad_len) == 1) &&
           EVP_EncryptUpdate(ctx, out, &out_len, plain, (int)len) == 1 && out_len == len &&
           EVP_EncryptFinal_ex(ctx, out + out_len, &final_len) == 1 && final_len == 0 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_SIZE, out + len) == 1;
}

static PyObject *gcm_encrypt(GcmObject *self, PyObject *args) {
    Py_buffer nonce, data, aad = {0};
    PyObject *aad_obj = Py_None, *sealed = NULL;
    if (!PyArg_ParseTuple(args, "y*y*O:encrypt", &nonce, &data, &aad_obj)) return NULL;
    if (aad_obj != Py_None && PyObject_GetBuffer(aad_obj, &aad, PyBUF_SIMPLE) < 0) goto done;
    if (nonce.len != NONCE_SIZE) {
        PyErr_SetString(PyExc_ValueError, "the nonce is 12 bytes");
    } else if ((sealed = PyBytes_FromStringAndSize(NULL, data.len + TAG_SIZE)) != NULL &&
               !gcm_seal(self, nonce.buf, data.buf, data.len, aad.buf, aad_obj == Py_None ? 0 : aad.len,
                         (unsigned char *)PyBytes_AS_STRING(sealed))) {
        Py_CLEAR(sealed);
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL could not seal with AES-256-GCM");
    }
    if (aad_obj != Py_None) PyBuffer_Release(&aad);
done:
    PyBuffer_Release(&nonce);
    PyBuffer_Release(&data);
    return sealed;
}

static PyObject *gcm_decrypt(GcmObject *self, PyObject *args) {
    Py_buffer nonce, data, aad = {0};
    PyObject *aad_obj = Py_None;
    if (!PyArg_ParseTuple(args, "y*y*O:decrypt", &nonce, &data, &aad_obj)) return NULL;
    PyObject *plain = NULL;
    if (aad_obj != Py_None && PyObject_GetBuffer(aad_obj, &aad, PyBUF_SIMPLE) < 0) goto done;
    if (nonce.len != NONCE_SIZE) {
        PyErr_SetString(PyExc_ValueError, "the nonce is 12 bytes");
    } else {
        plain = gcm_open(self, nonce.buf, data.buf, data.len, aad.buf, aad_obj == Py_None ? 0 : aad.len);
    }
    if (aad_obj != Py_None) PyBuffer_Release(&aad);
done:
    PyBuffer_Release(&nonce);
    PyBuffer_Release(&data);
    return plain;
}

static PyMethodDef gcm_methods[] = {
    {"decrypt", (PyCFunction)gcm_decrypt, METH_VARARGS,
     "decrypt(nonce, data, aad) -> bytes: AESGCM.decrypt's contract (InvalidTag when it does not verify)."},
    {"encrypt", (PyCFunction)gcm_encrypt, METH_VARARGS,
     "encrypt(nonce, data, aad) -> bytes: AESGCM.encrypt's contract (ciphertext and tag)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GcmType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "strongroom.crypto._gcm.Gcm",
    .tp_basicsize = sizeof(GcmObject),
    .tp_dealloc = (destructor)gcm_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An AES-256-GCM key ready to seal and open (OpenSSL EVP). Never printed: it has no repr of its key.",
    .tp_methods = gcm_methods,
    .tp_new = gcm_new,
};

/* ---- open_run -------------------------------------------------------------------------------------- */

/* Field mode's settings, checked once (check_field_spec): top-level member names (rule order), their paths' AAD
 * suffixes, the AAD label and the bound topic part per AAD profile id. */
typedef struct {
    PyObject *names, *suffixes, *label, *topic_parts;
} FieldSpec;

static int check_field_spec(const FieldSpec *f);
static PyObject *open_document(PyObject *value, const FieldSpec *f, PyObject *subject, PyObject *ciphers);

/* Set once by configure(): how a DecryptedMessage is built (its type, its slots' setters in field order, the
 * DECRYPTED status) and the name of the marker header, which may appear only first. */
static PyTypeObject *message_type;
static PyObject *setters[N_FIELDS];
static PyObject *decrypted_status;
static PyObject *marker_name;

static PyObject *s_error, *s_topic, *s_headers, *s_value, *s_key, *s_partition, *s_offset, *s_timestamp,
    *s_leader_epoch, *s_move_to_end;

static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *type, *fields, *status, *name;
    if (!PyArg_ParseTuple(args, "O!O!OU:configure", &PyType_Type, &type, &PyTuple_Type, &fields, &status, &name))
        return NULL;
    if (PyTuple_GET_SIZE(fields) != N_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "configure: 12 slot setters expected");
        return NULL;
    }
    for (int i = 0; i < N_FIELDS; i++) {
        PyObject *setter = PyTuple_GET_ITEM(fields, i);
        if (Py_TYPE(setter)->tp_descr_set == NULL) {
            PyErr_SetString(PyExc_TypeError, "configure: a setter is not a data descriptor");
            return NULL;
        }
        Py_INCREF(setter);
        Py_XSETREF(setters[i], setter);
    }
    Py_INCREF(type);
    Py_XSETREF(message_type, (PyTypeObject *)type);
    Py_INCREF(status);
    Py_XSETREF(decrypted_status, status);
    Py_INCREF(name);
    Py_XSETREF(marker_name, name);
    Py_RETURN_NONE;
}

static inline PyObject *call0(PyObject *obj, PyObject *name) {
    PyObject *self = obj;
    return PyObject_VectorcallMethod(name, &self, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* key_id to the recent end of the ready ciphers (an OrderedDict, least recently used out first): 1 moved, 0 gone
 * (emptied by an erasure meanwhile: the Python path asks the table again), -1 error. */
static int lru_touch(PyObject *entries, PyObject *key_id) {
    PyObject *moved = PyObject_CallMethodOneArg(entries, s_move_to_end, key_id);
    if (moved != NULL) {
        Py_DECREF(moved);
        return 1;
    }
    if (!PyErr_ExceptionMatches(PyExc_KeyError)) return -1;
    PyErr_Clear();
    return 0;
}

/* A DecryptedMessage of msg (whose partition and offset the caller read) with this plaintext, headers and
 * subject: what batch_open.fast_message builds. */
static PyObject *new_message(PyObject *msg, PyObject *topic, PyObject *partition, PyObject *offset, PyObject *key,
                             PyObject *plain, PyObject *rest, PyObject *subject) {
    PyObject *message = NULL, *stamp = call0(msg, s_timestamp);
    if (stamp == NULL) return NULL;
    if (!PyTuple_Check(stamp) || PyTuple_GET_SIZE(stamp) != 2) {
        PyErr_SetString(PyExc_TypeError, "Message.timestamp() is not a (type, timestamp) pair");
        Py_DECREF(stamp);
        return NULL;
    }
    PyObject *epoch = call0(msg, s_leader_epoch);
    if (epoch == NULL) {
        Py_DECREF(stamp);
        return NULL;
    }
    PyObject *ts_type = PyTuple_GET_ITEM(stamp, 0);
    int none_type = PyLong_Check(ts_type) && PyLong_AsLong(ts_type) == 0;
    /* borrowed: every one outlives this call */
    PyObject *values[N_FIELDS] = {topic, partition, offset, key, plain, rest,
                                  none_type ? Py_None : PyTuple_GET_ITEM(stamp, 1), ts_type, epoch,
                                  decrypted_status, subject, Py_False};
    message = message_type->tp_alloc(message_type, 0);
    for (int i = 0; message != NULL && i < N_FIELDS; i++) {
        if (Py_TYPE(setters[i])->tp_descr_set(setters[i], message, values[i]) < 0) {
            Py_CLEAR(message);
            break;
        }
    }
    Py_DECREF(epoch);
    Py_DECREF(stamp);
    return message;
}

/* One record: 1 opened (appended to out, its offset noted in finished), 0 not simple here, -1 error. fields: NULL
 * for whole values; field mode's settings, whose records are opened by open_document (the subject: the record key,
 * as strict UTF-8). */
static int open_one(PyObject *msg, PyObject *topic, PyObject *marker, PyObject *bound, PyObject *openers,
                    PyObject *entries, PyObject *out, PyObject *finished, const FieldSpec *fields) {
    PyObject *obj = NULL, *headers = NULL, *value = NULL, *key = NULL, *rest = NULL, *head = NULL,
             *lookup = NULL, *plain = NULL, *message = NULL, *partition_key = NULL, *offset = NULL,
             *decoded = NULL;
    int result = -1;

    if ((obj = call0(msg, s_error)) == NULL) goto done;
    if (obj != Py_None) goto not_simple;
    Py_DECREF(obj);
    if ((obj = call0(msg, s_topic)) == NULL) goto done;
    if (obj != topic) {
        int same = PyObject_RichCompareBool(obj, topic, Py_EQ);
        if (same < 0) goto done;
        if (!same) goto not_simple;
    }
    Py_CLEAR(obj);
    if ((headers = call0(msg, s_headers)) == NULL) goto done;
    if (!PyList_Check(headers) || PyList_GET_SIZE(headers) == 0) goto not_simple;
    int first = PyObject_RichCompareBool(PyList_GET_ITEM(headers, 0), marker, Py_EQ);
    if (first < 0) goto done;
    if (!first) goto not_simple;
    if ((value = call0(msg, s_value)) == NULL) goto done;
    if (!PyBytes_CheckExact(value) || (fields == NULL && PyBytes_GET_SIZE(value) < MIN_SIZE)) goto not_simple;
    if ((key = call0(msg, s_key)) == NULL) goto done;
    if (!PyBytes_CheckExact(key) || PyBytes_GET_SIZE(key) == 0) goto not_simple;
    if ((rest = PyList_GetSlice(headers, 1, PyList_GET_SIZE(headers))) == NULL) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rest); i++) {
        PyObject *pair = PyList_GET_ITEM(rest, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) < 1) goto not_simple;
        int named = PyObject_RichCompareBool(PyTuple_GET_ITEM(pair, 0), marker_name, Py_EQ);
        if (named < 0) goto done;
        if (named) goto not_simple;
    }
    if (fields != NULL) {
        if (PyBytes_GET_SIZE(key) > MAX_SUBJECT) goto not_simple;
        decoded = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), NULL);
        if (decoded == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto done;
            PyErr_Clear(); /* not a subject: the per-record path says so */
            goto not_simple;
        }
        if ((plain = open_document(value, fields, key, entries)) == NULL) goto done;
        if (!PyBytes_CheckExact(plain)) goto not_simple; /* a key to load, or the Python path's to judge */
        if ((obj = call0(msg, s_partition)) == NULL || (offset = call0(msg, s_offset)) == NULL) goto done;
        message = new_message(msg, topic, obj, offset, key, plain, rest, decoded);
        goto opened;
    }

    const unsigned char *bytes = (const unsigned char *)PyBytes_AS_STRING(value);
    if ((head = PyBytes_FromStringAndSize((const char *)bytes, HEADER_END)) == NULL) goto done;
    if ((lookup = PyTuple_Pack(3, head, key, bound)) == NULL) goto done;
    PyObject *opener = PyDict_GetItemWithError(openers, lookup); /* borrowed */
    if (opener == NULL) {
        if (PyErr_Occurred()) goto done;
        goto not_simple;
    }
    if (!PyTuple_Check(opener) || PyTuple_GET_SIZE(opener) != 3) goto not_simple;
    PyObject *key_id = PyTuple_GET_ITEM(opener, 0), *aad = PyTuple_GET_ITEM(opener, 1),
             *subject = PyTuple_GET_ITEM(opener, 2);
    if (!PyBytes_Check(aad)) goto not_simple;
    Py_INCREF(opener); /* kept while the dicts may change under a callback below */
    PyObject *cipher = PyDict_GetItemWithError(entries, key_id);
    if (cipher == NULL || Py_TYPE(cipher) != &GcmType) {
        Py_DECREF(opener);
        if (PyErr_Occurred()) goto done;
        goto not_simple;
    }
    Py_INCREF(cipher);
    int touched = lru_touch(entries, key_id);
    if (touched <= 0) {
        Py_DECREF(cipher);
        Py_DECREF(opener);
        if (touched < 0) goto done;
        goto not_simple;
    }
    plain = gcm_open((GcmObject *)cipher, bytes + HEADER_END, bytes + NONCE_END,
                     PyBytes_GET_SIZE(value) - NONCE_END, (const unsigned char *)PyBytes_AS_STRING(aad),
                     PyBytes_GET_SIZE(aad));
    Py_DECREF(cipher);
    if (plain == NULL) {
        Py_DECREF(opener);
        if (!PyErr_ExceptionMatches(invalid_tag)) goto done;
        PyErr_Clear(); /* the per-record path names what is wrong with it */
        goto not_simple;
    }
    if ((obj = call0(msg, s_partition)) == NULL || (offset = call0(msg, s_offset)) == NULL) {
        Py_DECREF(opener);
        goto done;
    }
    message = new_message(msg, topic, obj, offset, key, plain, rest, subject);
    Py_DECREF(opener);
opened:
    if (message == NULL || PyList_Append(out, message) < 0) goto done;
    if ((partition_key = PyTuple_Pack(2, topic, obj)) == NULL) goto done;
    if (PyDict_SetItem(finished, partition_key, offset) < 0) goto done;
    result = 1;
    goto done;
not_simple:
    result = 0;
done:
    Py_XDECREF(obj);
    Py_XDECREF(headers);
    Py_XDECREF(value);
    Py_XDECREF(key);
    Py_XDECREF(rest);
    Py_XDECREF(head);
    Py_XDECREF(lookup);
    Py_XDECREF(plain);
    Py_XDECREF(message);
    Py_XDECREF(partition_key);
    Py_XDECREF(offset);
    Py_XDECREF(decoded);
    return result;
}

static PyObject *open_run(PyObject *module, PyObject *args) {
    PyObject *msgs, *topic, *marker, *bound, *openers, *entries, *out, *finished, *field_args = Py_None;
    Py_ssize_t start;
    FieldSpec spec, *fields = NULL;
    if (!PyArg_ParseTuple(args, "OnUO!UO!O!O!O!|O:open_run", &msgs, &start, &topic, &PyTuple_Type, &marker, &bound,
                          &PyDict_Type, &openers, &PyDict_Type, &entries, &PyList_Type, &out, &PyDict_Type,
                          &finished, &field_args))
        return NULL;
    if (field_args != Py_None) { /* (names, suffixes, label, topic parts): open_fields' */
        if (!PyArg_ParseTuple(field_args, "O!O!SO!:open_run fields", &PyTuple_Type, &spec.names, &PyTuple_Type,
                              &spec.suffixes, &spec.label, &PyTuple_Type, &spec.topic_parts) ||
            !check_field_spec(&spec))
            return NULL;
        fields = &spec;
    }
    if (message_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "open_run before configure");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(msgs, "open_run: msgs is not a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), index = start < 0 ? 0 : start;
    for (; index < n; index++) {
        int opened = open_one(PySequence_Fast_GET_ITEM(seq, index), topic, marker, bound, openers, entries, out,
                              finished, fields);
        if (opened < 0) {
            Py_DECREF(seq);
            return NULL;
        }
        if (opened == 0) break;
    }
    Py_DECREF(seq);
    return PyLong_FromSsize_t(index);
}

/* ---- field mode: seal_fields, open_fields ---------------------------------------------------------- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const unsigned char SUBJECT_KEY_PREFIX[4] = {0xF5, 0x01, 0x01, 0x01};

static Py_ssize_t b64_size(Py_ssize_t n) { return (n + 2) / 3 * 4; }

/* base64 (standard alphabet, padded) of in (n bytes) into out (b64_size(n) bytes): binascii.b2a_base64's text. */
static void b64_encode(const unsigned char *in, Py_ssize_t n, unsigned char *out) {
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
        out[0] = B64[v >> 18], out[1] = B64[(v >> 12) & 63], out[2] = B64[(v >> 6) & 63], out[3] = B64[v & 63];
        out += 4;
    }
    if (n - i == 1) {
        unsigned v = (unsigned)in[i] << 16;
        out[0] = B64[v >> 18], out[1] = B64[(v >> 12) & 63], out[2] = '=', out[3] = '=';
    } else if (n - i == 2) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;
        out[0] = B64[v >> 18], out[1] = B64[(v >> 12) & 63], out[2] = B64[(v >> 6) & 63], out[3] = '=';
    }
}

/* The value of each base64 digit, 64 for every other byte. Filled on first use. */
static unsigned char b64_digits[256];
static int b64_ready;

static void b64_init(void) {
    if (b64_ready) return;
    memset(b64_digits, 64, sizeof b64_digits);
    for (int i = 0; i < 64; i++) b64_digits[(unsigned char)B64[i]] = (unsigned char)i;
    b64_ready = 1;
}

/* The bytes of base64 text as b64_encode writes it (padded, no other character, unused bits zero) into out (n / 4 *
 * 3 bytes at least): their number, or -1 for any other text, which the Python path's strict decoder judges. */
static Py_ssize_t b64_decode(const unsigned char *in, Py_ssize_t n, unsigned char *out) {
    if (n == 0 || n % 4) return -1;
    b64_init();
    int pad = in[n - 1] != '=' ? 0 : in[n - 2] != '=' ? 1 : 2;
    Py_ssize_t written = 0, full = n - 4;
    for (Py_ssize_t i = 0; i < full; i += 4) {
        unsigned a = b64_digits[in[i]], b = b64_digits[in[i + 1]], c = b64_digits[in[i + 2]], d = b64_digits[in[i + 3]];
        if ((a | b | c | d) & 64) return -1;
        unsigned v = a << 18 | b << 12 | c << 6 | d;
        out[written] = (unsigned char)(v >> 16), out[written + 1] = (unsigned char)(v >> 8), out[written + 2] = (unsigned char)v;
        written += 3;
    }
    const unsigned char *last = in + full;
    unsigned a = b64_digits[last[0]], b = b64_digits[last[1]], c = pad == 2 ? 0 : b64_digits[last[2]],
             d = pad ? 0 : b64_digits[last[3]];
    if ((a | b | c | d) & 64) return -1;
    unsigned v = a << 18 | b << 12 | c << 6 | d;
    if ((pad == 2 && (v & 0xFFFF)) || (pad == 1 && (v & 0xFF))) return -1; /* unused bits set */
    out[written++] = (unsigned char)(v >> 16);
    if (pad < 2) out[written++] = (unsigned char)(v >> 8);
    if (pad < 1) out[written++] = (unsigned char)v;
    return written;
}

/* Whether t is a tuple of n bytes objects (n < 0: any number). */
static int bytes_tuple(PyObject *t, Py_ssize_t n) {
    if (n >= 0 && PyTuple_GET_SIZE(t) != n) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(t, i))) return 0;
    return 1;
}

/* The indexes of the names s found, in the order their values sit in the text; how many. */
static Py_ssize_t found_in_order(const JsScan *s, Py_ssize_t n_names, Py_ssize_t *order) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < n_names; i++) {
        if (s->spans[2 * i] < 0) continue;
        Py_ssize_t j = n++;
        for (; j > 0 && s->spans[2 * order[j - 1]] > s->spans[2 * i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    return n;
}

static Py_ssize_t max_size(PyObject *t) {
    Py_ssize_t most = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
        if (PyBytes_GET_SIZE(PyTuple_GET_ITEM(t, i)) > most) most = PyBytes_GET_SIZE(PyTuple_GET_ITEM(t, i));
    return most;
}

/*
 * seal_fields(value, names, suffixes, aad_base, header, cipher, nonces) -> bytes | None
 *
 * json_fields._seal_members for one record: the document read strictly and written canonically, the value of each
 * top-level member names[i] (canonical name bytes, rule order) sealed under cipher with AAD aad_base ‖ suffixes[i]
 * (label, header, bound topic, subject; the rule path's u16 length and bytes) into header ‖ nonce ‖ ciphertext ‖
 * tag, written as "sr1:" + base64. The j-th field sealed in rule order takes the j-th nonce of nonces (12 bytes
 * each, one per name at least), as the Python path draws them. value itself when no rule field is present; None when
 * the Python path must read it (the reader is not sure of it, or a string in it already starts with "sr1:").
 */
static PyObject *seal_fields(PyObject *module, PyObject *args) {
    PyObject *value, *names, *suffixes, *aad_base, *header, *cipher, *nonces;
    if (!PyArg_ParseTuple(args, "SO!O!SSO!S:seal_fields", &value, &PyTuple_Type, &names, &PyTuple_Type, &suffixes,
                          &aad_base, &header, &GcmType, &cipher, &nonces))
        return NULL;
    Py_ssize_t n_names = PyTuple_GET_SIZE(names);
    if (!scan_names_ok(names)) return NULL;
    if (!bytes_tuple(suffixes, n_names) || PyBytes_GET_SIZE(header) != HEADER_END ||
        PyBytes_GET_SIZE(nonces) < n_names * NONCE_SIZE) {
        PyErr_SetString(PyExc_ValueError, "seal_fields: one path suffix per name, a 21-byte envelope header and "
                                          "12 bytes of nonce per name");
        return NULL;
    }
    PyObject *result = NULL;
    unsigned char *aad = NULL, *envelope = NULL;
    Py_ssize_t *order = PyMem_Malloc((n_names + 1) * sizeof(Py_ssize_t)), *rank = PyMem_Malloc((n_names + 1) * sizeof(Py_ssize_t));
    JsScan s;
    int r = scan_document(&s, (const unsigned char *)PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), names, 1);
    if (r == JS_ERROR) goto done;
    if (order == NULL || rank == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (r == JS_FALLBACK || s.sealed_strings) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t n_found = found_in_order(&s, n_names, order);
    if (n_found == 0) {
        result = Py_NewRef(value); /* no rule matched: the value as it came */
        goto done;
    }
    Py_ssize_t total = s.len, most = 0, sealed_count = 0;
    for (Py_ssize_t i = 0; i < n_names; i++) {
        rank[i] = sealed_count;
        if (s.spans[2 * i] < 0) continue;
        sealed_count++;
        Py_ssize_t plain_len = s.spans[2 * i + 1] - s.spans[2 * i];
        total += FIELD_QUOTE_LEN + b64_size(HEADER_END + NONCE_SIZE + plain_len + TAG_SIZE) + 1 - plain_len;
        if (plain_len > most) most = plain_len;
    }
    Py_ssize_t base_len = PyBytes_GET_SIZE(aad_base);
    aad = PyMem_Malloc(base_len + max_size(suffixes) + 1);
    envelope = PyMem_Malloc(HEADER_END + NONCE_SIZE + most + TAG_SIZE);
    if (aad == NULL || envelope == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(aad, PyBytes_AS_STRING(aad_base), base_len);
    memcpy(envelope, PyBytes_AS_STRING(header), HEADER_END);
    if ((result = PyBytes_FromStringAndSize(NULL, total)) == NULL) goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result), *w = out;
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < n_found; k++) {
        Py_ssize_t i = order[k], start = s.spans[2 * i], end = s.spans[2 * i + 1];
        PyObject *suffix = PyTuple_GET_ITEM(suffixes, i);
        const unsigned char *nonce = (const unsigned char *)PyBytes_AS_STRING(nonces) + rank[i] * NONCE_SIZE;
        memcpy(w, s.out + at, start - at);
        w += start - at;
        memcpy(envelope + HEADER_END, nonce, NONCE_SIZE);
        memcpy(aad + base_len, PyBytes_AS_STRING(suffix), PyBytes_GET_SIZE(suffix));
        if (!gcm_seal((GcmObject *)cipher, nonce, s.out + start, end - start, aad, base_len + PyBytes_GET_SIZE(suffix),
                      envelope + HEADER_END + NONCE_SIZE)) {
            Py_CLEAR(result);
            PyErr_SetString(PyExc_RuntimeError, "OpenSSL could not seal with AES-256-GCM");
            goto done;
        }
        Py_ssize_t envelope_len = HEADER_END + NONCE_SIZE + (end - start) + TAG_SIZE;
        memcpy(w, FIELD_QUOTE, FIELD_QUOTE_LEN);
        w += FIELD_QUOTE_LEN;
        b64_encode(envelope, envelope_len, w);
        w += b64_size(envelope_len);
        *w++ = '"';
        at = end;
    }
    memcpy(w, s.out + at, s.len - at);
    w += s.len - at;
    if (w - out != total) { /* the sizes above and the writes here disagree: a bug, never a short record */
        Py_CLEAR(result);
        PyErr_SetString(PyExc_RuntimeError, "seal_fields: wrote another size than it computed");
    }
done:
    scan_release(&s);
    PyMem_Free(order);
    PyMem_Free(rank);
    PyMem_Free(aad);
    PyMem_Free(envelope);
    return result;
}

/*
 * open_fields(value, names, suffixes, label, topic_parts, subject, ciphers) -> bytes | (key_id,) | None
 *
 * json_fields._open_members for one record of a consumer: value must be in canonical form (what strongroom writes)
 * and each present rule field (top-level member names[i], rule order) a SUBJECT_KEY envelope in "sr1:" + base64
 * whose AAD profile has a bound topic in topic_parts (by profile id: u16 length ‖ topic; empty: not this path's)
 * and whose key's Gcm is in ciphers (key id -> Gcm, an OrderedDict: used keys move to its end). AAD: label ‖
 * envelope header ‖ topic part ‖ u32be len(subject) ‖ subject ‖ suffixes[i]. The opened document: each field's
 * plaintext (itself canonical JSON) spliced in. (key_id,) for the first field in rule order whose key is not in
 * ciphers (the caller loads it and asks again); None whenever the Python path must judge the record (not canonical,
 * a field of another shape, a tag that does not verify, a plaintext not in canonical form). value itself when no
 * rule field is present.
 */
static int check_field_spec(const FieldSpec *f) {
    if (!scan_names_ok(f->names)) return 0;
    if (!bytes_tuple(f->suffixes, PyTuple_GET_SIZE(f->names)) || !bytes_tuple(f->topic_parts, -1) ||
        PyBytes_GET_SIZE(f->label) > MAX_LABEL) {
        PyErr_SetString(PyExc_ValueError, "open_fields: one path suffix per name, topic parts as bytes and a label of "
                                          "at most 64 bytes");
        return 0;
    }
    return 1;
}

static PyObject *open_fields(PyObject *module, PyObject *args) {
    PyObject *value, *subject, *ciphers;
    FieldSpec f;
    if (!PyArg_ParseTuple(args, "SO!O!SO!SO!:open_fields", &value, &PyTuple_Type, &f.names, &PyTuple_Type,
                          &f.suffixes, &f.label, &PyTuple_Type, &f.topic_parts, &subject, &PyDict_Type, &ciphers))
        return NULL;
    if (!check_field_spec(&f)) return NULL;
    if (PyBytes_GET_SIZE(subject) > MAX_SUBJECT) {
        PyErr_SetString(PyExc_ValueError, "open_fields: a subject of at most 4096 bytes");
        return NULL;
    }
    return open_document(value, &f, subject, ciphers);
}

/* open_fields once its arguments are checked (value and subject bytes, ciphers a dict). */
static PyObject *open_document(PyObject *value, const FieldSpec *f, PyObject *subject, PyObject *ciphers) {
    PyObject *names = f->names, *suffixes = f->suffixes, *label = f->label, *topic_parts = f->topic_parts;
    Py_ssize_t n_names = PyTuple_GET_SIZE(names), size = PyBytes_GET_SIZE(value);
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(value);
    PyObject *result = NULL, *empty = PyTuple_New(0), **plains = PyMem_Calloc(n_names + 1, sizeof(PyObject *));
    Py_ssize_t *order = PyMem_Malloc((n_names + 1) * sizeof(Py_ssize_t));
    unsigned char *aad = NULL, *envelope = NULL;
    JsScan s;
    int r = scan_document(&s, data, size, names, 1);
    if (r == JS_ERROR || empty == NULL) goto done;
    if (plains == NULL || order == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (r == JS_FALLBACK || !scan_identical(&s, data, size)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t n_found = found_in_order(&s, n_names, order);
    if (n_found == 0) {
        result = Py_NewRef(value);
        goto done;
    }
    Py_ssize_t label_len = PyBytes_GET_SIZE(label), subject_len = PyBytes_GET_SIZE(subject), longest = 0;
    for (Py_ssize_t i = 0; i < n_names; i++)
        if (s.spans[2 * i] >= 0 && s.spans[2 * i + 1] - s.spans[2 * i] > longest)
            longest = s.spans[2 * i + 1] - s.spans[2 * i];
    aad = PyMem_Malloc(label_len + HEADER_END + max_size(topic_parts) + 4 + subject_len + max_size(suffixes) + 1);
    envelope = PyMem_Malloc(longest / 4 * 3 + 3);
    if (aad == NULL || envelope == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(aad, PyBytes_AS_STRING(label), label_len);
    Py_ssize_t total = s.len;
    PyObject *last_moved = NULL;
    for (Py_ssize_t i = 0; i < n_names; i++) { /* rule order: the first missing key is the Python path's first */
        Py_ssize_t start = s.spans[2 * i], end = s.spans[2 * i + 1];
        if (start < 0) continue;
        if (end - start < FIELD_QUOTE_LEN + 1 || memcmp(data + start, FIELD_QUOTE, FIELD_QUOTE_LEN) != 0) goto python;
        Py_ssize_t n = b64_decode(data + start + FIELD_QUOTE_LEN, end - 1 - start - FIELD_QUOTE_LEN, envelope);
        if (n < MIN_SIZE || memcmp(envelope, SUBJECT_KEY_PREFIX, 4) != 0) goto python;
        unsigned profile = envelope[KEY_ID_END];
        if (profile >= (unsigned)PyTuple_GET_SIZE(topic_parts)) goto python;
        PyObject *part = PyTuple_GET_ITEM(topic_parts, profile);
        if (PyBytes_GET_SIZE(part) == 0) goto python;
        PyObject *key_id = PyBytes_FromStringAndSize((const char *)envelope + 4, KEY_ID_END - 4);
        if (key_id == NULL) goto done;
        PyObject *cipher = PyDict_GetItemWithError(ciphers, key_id); /* borrowed */
        if (cipher == NULL) {
            if (!PyErr_Occurred()) result = PyTuple_Pack(1, key_id);
            Py_DECREF(key_id);
            goto done;
        }
        if (Py_TYPE(cipher) != &GcmType) {
            Py_DECREF(key_id);
            goto python;
        }
        Py_INCREF(cipher);
        if (cipher != last_moved) { /* a record's fields mostly share one key */
            int touched = lru_touch(ciphers, key_id);
            if (touched <= 0) {
                Py_DECREF(key_id);
                Py_DECREF(cipher);
                if (touched < 0) goto done;
                goto python;
            }
            last_moved = cipher; /* compared by identity only */
        }
        Py_DECREF(key_id);
        unsigned char *w = aad + label_len;
        memcpy(w, envelope, HEADER_END), w += HEADER_END;
        memcpy(w, PyBytes_AS_STRING(part), PyBytes_GET_SIZE(part)), w += PyBytes_GET_SIZE(part);
        w[0] = (unsigned char)(subject_len >> 24), w[1] = (unsigned char)(subject_len >> 16);
        w[2] = (unsigned char)(subject_len >> 8), w[3] = (unsigned char)subject_len, w += 4;
        memcpy(w, PyBytes_AS_STRING(subject), subject_len), w += subject_len;
        PyObject *suffix = PyTuple_GET_ITEM(suffixes, i);
        memcpy(w, PyBytes_AS_STRING(suffix), PyBytes_GET_SIZE(suffix)), w += PyBytes_GET_SIZE(suffix);
        PyObject *plain = gcm_open((GcmObject *)cipher, envelope + HEADER_END, envelope + NONCE_END, n - NONCE_END, aad,
                                   w - aad);
        Py_DECREF(cipher);
        if (plain == NULL) {
            if (!PyErr_ExceptionMatches(invalid_tag)) goto done;
            PyErr_Clear(); /* the Python path names what is wrong with it */
            goto python;
        }
        plains[i] = plain;
        JsScan field;
        const unsigned char *text = (const unsigned char *)PyBytes_AS_STRING(plain);
        int read = scan_document(&field, text, PyBytes_GET_SIZE(plain), empty, 0);
        int canonical = read == JS_OK && scan_identical(&field, text, PyBytes_GET_SIZE(plain));
        scan_release(&field);
        if (read == JS_ERROR) goto done;
        if (!canonical) goto python; /* not as strongroom writes it: the Python path reads and writes it */
        total += PyBytes_GET_SIZE(plain) - (end - start);
    }
    if ((result = PyBytes_FromStringAndSize(NULL, total)) == NULL) goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result), *w = out;
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < n_found; k++) {
        Py_ssize_t i = order[k], start = s.spans[2 * i];
        memcpy(w, data + at, start - at), w += start - at;
        memcpy(w, PyBytes_AS_STRING(plains[i]), PyBytes_GET_SIZE(plains[i])), w += PyBytes_GET_SIZE(plains[i]);
        at = s.spans[2 * i + 1];
    }
    memcpy(w, data + at, size - at), w += size - at;
    if (w - out != total) {
        Py_CLEAR(result);
        PyErr_SetString(PyExc_RuntimeError, "open_fields: wrote another size than it computed");
    }
    goto done;
python:
    result = Py_NewRef(Py_None);
done:
    scan_release(&s);
    if (plains != NULL)
        for (Py_ssize_t i = 0; i < n_names; i++) Py_XDECREF(plains[i]);
    PyMem_Free(plains);
    PyMem_Free(order);
    PyMem_Free(aad);
    PyMem_Free(envelope);
    Py_XDECREF(empty);
    return result;
}

/* ---- wrap_subject_keys ----------------------------------------------------------------------------- */

/* nonce ‖ AES-256-GCM(wk, sk) ‖ tag into out (WRAPPED_SIZE bytes), AAD = label ‖ u32be(len subject) ‖
 * subject ‖ key id ‖ WK id. 1 on success. */
static int wrap_one(EVP_CIPHER_CTX *ctx, const unsigned char *sk, const unsigned char *nonce, const unsigned char *aad,
                    int aad_len, unsigned char *out) {
    int len = 0;
    memcpy(out, nonce, NONCE_SIZE);
    return EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, nonce) == 1 &&
           EVP_EncryptUpdate(ctx, NULL, &len, aad, aad_len) == 1 &&
           EVP_EncryptUpdate(ctx, out + NONCE_SIZE, &len, sk, KEY_SIZE) == 1 && len == KEY_SIZE &&
           EVP_EncryptFinal_ex(ctx, out + NONCE_SIZE + KEY_SIZE, &len) == 1 && len == 0 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_SIZE, out + NONCE_SIZE + KEY_SIZE) == 1;
}

static PyObject *wrap_subject_keys(PyObject *module, PyObject *args) {
    Py_buffer key, label, wk_id, material;
    PyObject *subjects, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*O!y*:wrap_subject_keys", &key, &label, &wk_id, &PyList_Type, &subjects,
                          &material))
        return NULL;
    EVP_CIPHER_CTX *ctx = NULL;
    Py_ssize_t n = PyList_GET_SIZE(subjects);
    if (key.len != KEY_SIZE || wk_id.len != WK_ID_SIZE || label.len > MAX_LABEL || material.len != n * SK_MATERIAL) {
        PyErr_SetString(PyExc_ValueError, "wrap_subject_keys: a 32-byte key, a 16-byte WK id, a label of at most "
                                          "64 bytes and 60 bytes of randomness per subject");
        goto done;
    }
    ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL || EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key.buf, NULL) != 1) {
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL could not set up AES-256-GCM");
        goto done;
    }
    result = PyList_New(n);
    if (result == NULL) goto done;
    unsigned char aad[MAX_LABEL + 4 + MAX_SUBJECT + SK_ID_SIZE + WK_ID_SIZE];
    memcpy(aad, label.buf, label.len);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *subject = PyList_GET_ITEM(subjects, i);
        if (!PyBytes_Check(subject) || PyBytes_GET_SIZE(subject) > MAX_SUBJECT) {
            PyErr_SetString(PyExc_ValueError, "wrap_subject_keys: each subject is bytes of at most 4096");
            Py_CLEAR(result);
            goto done;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(subject);
        const unsigned char *base = (const unsigned char *)material.buf + i * SK_MATERIAL;
        unsigned char *at = aad + label.len;
        at[0] = (unsigned char)(size >> 24), at[1] = (unsigned char)(size >> 16);
        at[2] = (unsigned char)(size >> 8), at[3] = (unsigned char)size;
        memcpy(at + 4, PyBytes_AS_STRING(subject), size);
        memcpy(at + 4 + size, base + KEY_SIZE, SK_ID_SIZE);
        memcpy(at + 4 + size + SK_ID_SIZE, wk_id.buf, WK_ID_SIZE);
        int aad_len = (int)(label.len + 4 + size + SK_ID_SIZE + WK_ID_SIZE);
        PyObject *key_id = PyBytes_FromStringAndSize((const char *)base + KEY_SIZE, SK_ID_SIZE);
        PyObject *sk = PyBytes_FromStringAndSize((const char *)base, KEY_SIZE);
        PyObject *wrapped = PyBytes_FromStringAndSize(NULL, WRAPPED_SIZE);
        PyObject *made = NULL;
        if (key_id != NULL && sk != NULL && wrapped != NULL) {
            if (wrap_one(ctx, base, base + KEY_SIZE + SK_ID_SIZE, aad, aad_len,
                         (unsigned char *)PyBytes_AS_STRING(wrapped)))
                made = PyTuple_Pack(3, key_id, sk, wrapped);
            else
                PyErr_SetString(PyExc_RuntimeError, "OpenSSL could not seal a subject key");
        }
        Py_XDECREF(key_id);
        Py_XDECREF(sk);
        Py_XDECREF(wrapped);
        if (made == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, made);
    }
done:
    EVP_CIPHER_CTX_free(ctx); /* cleanses the key schedule; NULL is fine */
    PyBuffer_Release(&key);
    PyBuffer_Release(&label);
    PyBuffer_Release(&wk_id);
    PyBuffer_Release(&material);
    return result;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(message_type, slot_setters, decrypted_status, marker_name): how open_run builds its messages."},
    {"open_run", open_run, METH_VARARGS,
     "open_run(msgs, start, topic, marker, bound_topic, openers, ciphers, out, finished, fields=None) -> index of "
     "the first record it did not open (len(msgs) when it opened all); fields: field mode's (names, suffixes, label, "
     "topic_parts), as open_fields takes them."},
    {"seal_fields", seal_fields, METH_VARARGS,
     "seal_fields(value, names, suffixes, aad_base, header, cipher, nonces) -> bytes | None: a record's top-level "
     "rule fields sealed (json_fields._seal_members), None when the Python path must read it."},
    {"open_fields", open_fields, METH_VARARGS,
     "open_fields(value, names, suffixes, label, topic_parts, subject, ciphers) -> bytes | (key_id,) | None: a "
     "canonical record's rule fields opened, the first key it lacks, or None when the Python path must judge it."},
    {"wrap_subject_keys", wrap_subject_keys, METH_VARARGS,
     "wrap_subject_keys(wk, label, wk_id, subjects, material) -> [(key id, subject key, wrapped)]: "
     "keys.wrapping.new_wrapped_subject_keys in one call."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "strongroom.crypto._gcm",
    "The consumer's native opener: AES-256-GCM through OpenSSL's EVP and batch_open's loop for simple records.",
    -1, module_methods,
};

static int intern(PyObject **slot, const char *name) {
    *slot = PyUnicode_InternFromString(name);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__gcm(void) {
    if (PyType_Ready(&GcmType) < 0) return NULL;
    if (intern(&s_error, "error") || intern(&s_topic, "topic") || intern(&s_headers, "headers") ||
        intern(&s_value, "value") || intern(&s_key, "key") || intern(&s_partition, "partition") ||
        intern(&s_offset, "offset") || intern(&s_timestamp, "timestamp") || intern(&s_leader_epoch, "leader_epoch") ||
        intern(&s_move_to_end, "move_to_end"))
        return NULL;
    PyObject *exceptions = PyImport_ImportModule("cryptography.exceptions");
    if (exceptions == NULL) return NULL;
    invalid_tag = PyObject_GetAttrString(exceptions, "InvalidTag");
    Py_DECREF(exceptions);
    if (invalid_tag == NULL) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    if (PyModule_AddIntConstant(module, "HEADER_END", HEADER_END) < 0 ||
        PyModule_AddIntConstant(module, "MIN_SIZE", MIN_SIZE) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&GcmType);
    if (PyModule_AddObject(module, "Gcm", (PyObject *)&GcmType) < 0) {
        Py_DECREF(&GcmType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
