/* SPDX-License-Identifier: MIT */
/* Operator commands: --status, --break, --list, in text for humans or one JSON object.
 * Each returns rlock's exit status. */
#ifndef RLOCK_REPORT_H
#define RLOCK_REPORT_H

#include "cli.h"
#include "client.h"

int report_status(struct client *c, const struct opts *o);
int report_break(struct client *c, const struct opts *o);
int report_list(struct client *c, const struct opts *o);

#endif
