/* Fuzz the config-file line parser (cli_config_line) with arbitrary lines. Properties:
 * no crash; a setting's value (if any) points into the line and has no leading or
 * trailing blanks; an error always comes with a NUL-terminated reason. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char line[4096], err[300];
	const char *val = NULL;
	int id = 0;

	/* load_config hands over at most one fgets() line: no NUL inside, < 4096 bytes. */
	if (size >= sizeof line)
		size = sizeof line - 1;
	memcpy(line, data, size);
	line[size] = '\0';
	size_t len = strlen(line);
	err[0] = '\0';
	int kind = cli_config_line(line, &id, &val, err, sizeof err);
	if (kind == 1 && val) {
		if (val < line || val > line + len)
			abort();
		size_t n = strlen(val);
		if (n &&
		    (val[0] == ' ' || val[0] == '\t' || val[n - 1] == ' ' || val[n - 1] == '\t'))
			abort();
	}
	if (kind < 0 && (!err[0] || !memchr(err, '\0', sizeof err)))
		abort();
	if (kind < -1 || kind > 1)
		abort();
	return 0;
}
