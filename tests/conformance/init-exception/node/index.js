throw new Error('config missing at import');
