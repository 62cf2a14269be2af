/* sal.h (libndk WDK kit): the SAL annotations, as empty macros. */
#ifndef NDKWDK_SAL_TOP_H
#define NDKWDK_SAL_TOP_H
#include <ndkwdk/sal.h>
#endif
