/* file: whole files read into memory, with a cap.
 *
 * Configuration, certificates, keys, fixtures: small files read at once.
 * The cap is the caller's: pass at most what it is willing to hold.
 */
#ifndef OP_FILE_H
#define OP_FILE_H

#include <stddef.h>
#include <stdio.h>

/** Read a whole file into a NUL-terminated malloc'd string; 0 or a negative
 *  code (OP_ETOOBIG when larger than max). len may be NULL. */
int file_read_all(const char *path, size_t max, char **out, size_t *len);
/** The same for an open stream (read to its end; not closed): stdin, a pipe. */
int file_read_stream(FILE *f, size_t max, char **out, size_t *len);

#endif
