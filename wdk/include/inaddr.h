/* inaddr.h (libndk WDK kit): see ndkwdk/ws2.h. */
#ifndef NDKWDK_INADDR_H
#define NDKWDK_INADDR_H
#include <ndkwdk/ws2.h>
#endif
