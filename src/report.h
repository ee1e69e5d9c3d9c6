/* SPDX-License-Identifier: MIT */
/* Operator commands: --status, --break, --list, in text for humans or one JSON object.
 * Each returns rlock's exit status, and closes s. */
#ifndef RLOCK_REPORT_H
#define RLOCK_REPORT_H

#include "frontend.h"

int report_status(struct store *s, const struct opts *o);
int report_break(struct store *s, const struct opts *o);
int report_list(struct store *s, const struct opts *o);

#endif
