/* quantity: Kubernetes resource quantities (resource.Quantity) as integers.
 *
 * "4", "500m", "1.5Gi", "2e3", "1G": a decimal number with an optional
 * binary (Ki..Ei) or decimal (n, u, m, k, M..E) suffix or a decimal
 * exponent, read the way Quantity.Value() reads it: rounded up (away from
 * zero) to an integer.
 */
#ifndef OP_QUANTITY_H
#define OP_QUANTITY_H

/** Parse s into its value rounded up to an integer (clamped to LLONG_MAX).
 *  0, or OP_EINVAL for NULL, empty or malformed text. */
int quantity_parse(const char *s, long long *out);

#endif
