/* in6addr.h (libndk WDK kit): see ndkwdk/ws2.h. */
#ifndef NDKWDK_IN6ADDR_H
#define NDKWDK_IN6ADDR_H
#include <ndkwdk/ws2.h>
#endif
