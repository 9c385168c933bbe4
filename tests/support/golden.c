/* golden.c - parse the golden manifest and load raw float32 LE arrays. */
#include "golden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CDC_TEST_DATA_DIR
#error "CDC_TEST_DATA_DIR must name the tests/data directory"
#endif

const char *cdc_golden_dir(void)
{
    return CDC_TEST_DATA_DIR "/golden";
}

static int parse_line(char *line, cdc_golden_case_t *gc)
{
    char *fields[15];
    int count = 0;
    char *cursor = line;
    /* Tab-separated; strtok would merge empty fields, so split by hand. */
    while (count < 15) {
        char *tab = strchr(cursor, '\t');
        fields[count++] = cursor;
        if (!tab)
            break;
        *tab = '\0';
        cursor = tab + 1;
    }
    if (count != 15 || strchr(fields[14], '\t'))
        return -1;
    int64_t *numbers[] = {&gc->batch, &gc->cin,  &gc->h,        &gc->w,    &gc->cout,
                          &gc->kernel, &gc->stride, &gc->pad, &gc->dilation};
    if (strlen(fields[0]) >= sizeof gc->name || strlen(fields[14]) >= sizeof gc->prefix)
        return -1;
    strcpy(gc->name, fields[0]);
    strcpy(gc->prefix, fields[14]);
    if (strcmp(fields[1], "conv") == 0)
        gc->kind = CDC_GOLDEN_CONV;
    else if (strcmp(fields[1], "fc") == 0)
        gc->kind = CDC_GOLDEN_FC;
    else
        return -1;
    for (int f = 2; f <= 13; f++) {
        char *end;
        long long value = strtoll(fields[f], &end, 10);
        if (end == fields[f] || *end != '\0' || value < 0)
            return -1;
        if (f <= 10)
            *numbers[f - 2] = value;
        else if (f == 11)
            gc->relu = value != 0;
        else if (f == 12)
            gc->out_h = value;
        else
            gc->out_w = value;
    }
    return 0;
}

int cdc_golden_manifest_load(const char *dir, cdc_golden_case_t **cases_p,
                             size_t *count_p, char *err, size_t err_size)
{
    char path[1024], line[1024];
    cdc_golden_case_t *cases = NULL;
    size_t count = 0, capacity = 0, line_no = 0;
    FILE *file;

    snprintf(path, sizeof path, "%s/manifest.tsv", dir);
    file = fopen(path, "r");
    if (!file) {
        snprintf(err, err_size, "cannot open %s", path);
        return -1;
    }
    while (fgets(line, sizeof line, file)) {
        size_t len = strlen(line);
        line_no++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        if (count == capacity) {
            size_t grown = capacity ? 2 * capacity : 64;
            cdc_golden_case_t *bigger = realloc(cases, grown * sizeof *cases);
            if (!bigger) {
                snprintf(err, err_size, "out of memory reading %s", path);
                goto fail;
            }
            cases = bigger;
            capacity = grown;
        }
        memset(&cases[count], 0, sizeof cases[count]);
        if (parse_line(line, &cases[count]) != 0) {
            snprintf(err, err_size, "%s:%zu: malformed line", path, line_no);
            goto fail;
        }
        count++;
    }
    fclose(file);
    if (count == 0) {
        free(cases);
        snprintf(err, err_size, "%s has no cases", path);
        return -1;
    }
    *cases_p = cases;
    *count_p = count;
    return 0;
fail:
    fclose(file);
    free(cases);
    return -1;
}

/* Read exactly count float32 LE values from dir/prefix.suffix into a new array. */
static float *load_floats(const char *dir, const char *prefix, const char *suffix,
                          size_t count, char *err, size_t err_size)
{
    char path[1024];
    FILE *file;
    unsigned char *bytes = NULL;
    float *values = NULL;
    long size;

    snprintf(path, sizeof path, "%s/%s.%s", dir, prefix, suffix);
    file = fopen(path, "rb");
    if (!file) {
        snprintf(err, err_size, "cannot open %s", path);
        return NULL;
    }
    if (fseek(file, 0, SEEK_END) != 0 || (size = ftell(file)) < 0 ||
        fseek(file, 0, SEEK_SET) != 0) {
        snprintf(err, err_size, "cannot size %s", path);
        goto done;
    }
    if ((unsigned long) size != count * 4u) {
        snprintf(err, err_size, "%s has %ld bytes, manifest says %zu floats", path, size,
                 count);
        goto done;
    }
    bytes = malloc(count * 4u + 1);
    values = malloc(count * sizeof(float) + 1);
    if (!bytes || !values || fread(bytes, 1, count * 4u, file) != count * 4u) {
        snprintf(err, err_size, "cannot read %s", path);
        free(values);
        values = NULL;
        goto done;
    }
    /* Assemble from bytes so the files read the same on any host byte order. */
    for (size_t i = 0; i < count; i++) {
        uint32_t u = (uint32_t) bytes[4 * i] | (uint32_t) bytes[4 * i + 1] << 8 |
                     (uint32_t) bytes[4 * i + 2] << 16 | (uint32_t) bytes[4 * i + 3] << 24;
        memcpy(&values[i], &u, sizeof u);
    }
done:
    free(bytes);
    fclose(file);
    return values;
}

int cdc_golden_data_load(const char *dir, const cdc_golden_case_t *gc,
                         cdc_golden_data_t *data, char *err, size_t err_size)
{
    memset(data, 0, sizeof *data);
    if (gc->kind == CDC_GOLDEN_CONV) {
        data->in_count = (size_t) (gc->batch * gc->cin * gc->h * gc->w);
        data->weights_count = (size_t) (gc->cout * gc->cin * gc->kernel * gc->kernel);
        data->out_count = (size_t) (gc->batch * gc->cout * gc->out_h * gc->out_w);
    } else {
        data->in_count = (size_t) (gc->batch * gc->cin);
        data->weights_count = (size_t) (gc->cout * gc->cin);
        data->out_count = (size_t) (gc->batch * gc->cout);
    }
    data->bias_count = (size_t) gc->cout;
    if (!(data->in = load_floats(dir, gc->prefix, "in", data->in_count, err, err_size)) ||
        !(data->weights =
              load_floats(dir, gc->prefix, "w", data->weights_count, err, err_size)) ||
        !(data->bias = load_floats(dir, gc->prefix, "b", data->bias_count, err, err_size)) ||
        !(data->out = load_floats(dir, gc->prefix, "out", data->out_count, err, err_size))) {
        cdc_golden_data_free(data);
        return -1;
    }
    return 0;
}

void cdc_golden_data_free(cdc_golden_data_t *data)
{
    free(data->in);
    free(data->weights);
    free(data->bias);
    free(data->out);
    data->in = data->weights = data->bias = data->out = NULL;
}
